package handler

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/auth"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/matchmaking/internal/games"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// fresh returns g, the recorded credential of a seat of game id, or a new
// one for that seat when g's has run out or is past half its life: a
// retry answered from a record gets a credential that works, as the
// game's creation sent again would have got (the game service freshens
// those alike). A game no longer kept, or a game service that fails,
// leaves g as it is: the answer stands, and ResumeGame is the way to a
// new credential.
func (h *Handler) fresh(ctx context.Context, id string, g store.Grant) store.Grant {
	cctx := ctx
	if c, ok := auth.Unverified(g.Token); ok {
		issued, expires := time.Unix(c.IssuedAt, 0), time.Unix(c.ExpiresAt, 0)
		if h.now().Before(issued.Add(expires.Sub(issued) / 2)) {
			return g
		}
		if h.now().Before(expires) {
			// Still good: the answer stands without a new one, so the
			// caller's time is kept for it. One run out is no answer.
			var cancel context.CancelFunc
			cctx, cancel = bestEffort(ctx)
			defer cancel()
		}
	}
	side := games.SidePB(g.Side)
	resp, err := h.games.Game().IssueSeatCredentials(cctx, &gamev1.IssueSeatCredentialsRequest{GameId: id, Side: side})
	if err != nil {
		if status.Code(err) != codes.NotFound {
			h.log.WarnContext(ctx, "freshen a recorded seat credential", "game", id, "err", err)
		}
		return g
	}
	for _, cr := range resp.GetCredentials() {
		if cr.GetSide() == side {
			return store.Grant{Side: g.Side, Token: cr.GetToken(), Expires: cr.GetExpiresAt().AsTime()}
		}
	}
	return g
}

// bestEffort bounds a call to the game service whose failure leaves the
// answer as it is to half of what remains of the caller's deadline (the
// connection's --matchmaking-call-timeout bounds it too), so that a
// caller whose deadline is shorter than that still gets the answer.
func bestEffort(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		return context.WithTimeout(ctx, time.Until(dl)/2)
	}
	return ctx, func() {}
}
