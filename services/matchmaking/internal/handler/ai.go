package handler

import (
	"context"
	"fmt"

	"github.com/palacehq/palace/pkg/apierr"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/services/matchmaking/internal/games"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// PlayAi creates a game against the AI at once. The game service allows
// undo in games with an AI seat, and runs the Janggi setup phase in which
// the human picks a formation.
func (h *Handler) PlayAi(ctx context.Context, req *matchmakingv1.PlayAiRequest) (*matchmakingv1.PlayAiResponse, error) {
	c, err := h.player(ctx)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	var errs []error
	if err := checkID("request_id", req.GetRequestId(), MaxRequestIDBytes); err != nil {
		errs = append(errs, err)
	}
	if _, err := store.KindName(req.GetKind()); err != nil {
		errs = append(errs, err)
	}
	if l := req.GetLevel(); l < 1 || l > 10 {
		errs = append(errs, apierr.New(apierr.Invalid, "level: %d is outside 1..10", l))
	}
	side := req.GetSide()
	switch side {
	case commonv1.Side_SIDE_UNSPECIFIED:
		// Random, but the same for a retry of the same request.
		side = commonv1.Side_SIDE_SECOND
		if games.FirstIsA("ai", c.Subject, req.GetRequestId()) {
			side = commonv1.Side_SIDE_FIRST
		}
	case commonv1.Side_SIDE_FIRST, commonv1.Side_SIDE_SECOND:
	default:
		errs = append(errs, apierr.New(apierr.Invalid, "side: unknown side %v", side))
	}
	control, err := store.OptionalControl(req.GetTimeControl())
	if err != nil {
		errs = append(errs, err)
	}
	if err := apierr.Problems(errs...); err != nil {
		return nil, h.fail(ctx, err)
	}
	// The game service makes another game of another request, even with
	// the same request id: the id is held to all that the game request is
	// made of (the player's name too, which a new sign-in may change), so
	// that a retry is the same game and the bound cannot be sidestepped.
	made := store.Made{
		Player: c.Subject, What: "ai", Request: req.GetRequestId(), Keep: h.cfg.GameKeep,
		Fingerprint: fmt.Sprintf("%d|%d|%d|%s|%s", req.GetKind(), req.GetLevel(), side, control, c.Name),
	}
	if err := h.admit(ctx, made, h.cfg.AIGames, "you", "game against the AI", "games against the AI"); err != nil {
		return nil, h.fail(ctx, err)
	}
	answer := func(g store.MadeGame) *matchmakingv1.PlayAiResponse {
		return &matchmakingv1.PlayAiResponse{Seat: seatPB(g.ID, g.Seat, games.AIPlayerID, games.AIName(req.GetLevel()))}
	}
	// A retry of a request whose game is recorded is answered from the
	// record: once the game service keeps the game no longer, the same
	// creation would make a new game under its id.
	kept, ok, err := h.store.MadeGame(ctx, made)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	if ok {
		kept.Seat = h.fresh(ctx, kept.ID, kept.Seat)
		return answer(kept), nil
	}
	g, err := h.games.CreateAI(ctx, games.AISpec{
		RequestID: games.RequestID("ai", c.Subject, req.GetRequestId()), Kind: req.GetKind(), Level: req.GetLevel(),
		Human: games.Human{ID: c.Subject, Name: c.Name}, HumanSide: side, Control: control,
	})
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	// After the game is made, so that a call that fails leaves the player
	// their ticket; a retry's game was made by the first call, and tickets
	// entered since are left alone.
	h.withdrawTickets(ctx, g.Created, c.Subject)
	mg := store.MadeGame{ID: g.ID, Seat: g.Seat, Created: g.Created}
	if err := h.store.RecordMadeGame(ctx, made, mg); err != nil {
		// Unrecorded, the game would be made again by a retry sent once
		// it is no longer kept; the retry told to come records it.
		return nil, h.fail(ctx, err)
	}
	return answer(mg), nil
}
