package handler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/palacehq/palace/pkg/apierr"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/services/matchmaking/internal/games"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

func rematchTopic(game string) string { return "r:" + game }

// gameOf reads a game matchmaking created, for one of its players.
func (h *Handler) gameOf(ctx context.Context, player, id string) (store.Game, error) {
	if err := checkID("game_id", id, MaxGameIDBytes); err != nil {
		return store.Game{}, err
	}
	g, err := h.store.LoadGame(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		// A game against the AI is listed for its player, not kept for
		// rematches.
		if e, lerr := h.store.PlayerGame(ctx, player, id); lerr == nil && e.Opponent == games.AIPlayerID {
			return g, apierr.New(apierr.Precondition, "game %s was against the AI: rematches are for games between two players; start another with PlayAi", id)
		}
		return g, apierr.New(apierr.NotFound, "game %s not found among the games matchmaking created recently", id)
	}
	if err != nil {
		return g, err
	}
	if player != g.First.ID && player != g.Second.ID {
		return g, apierr.New(apierr.PermissionDenied, "you did not play game %s", id)
	}
	return g, nil
}

// ended asks the game service whether the game is over. It reads with
// matchmaking's own service credential: the seat credential stored at
// creation runs out, or its key is removed, while the game is still kept.
func (h *Handler) ended(ctx context.Context, g store.Game) error {
	resp, err := h.games.Game().GetGames(ctx, &gamev1.GetGamesRequest{GameIds: []string{g.ID}})
	if status.Code(err) == codes.Unimplemented {
		// A game service of a release before GetGames (matchmaking updated
		// first, or the game service rolled back) is asked as those
		// releases were, with the seat credential recorded at creation.
		return h.endedAsSeat(ctx, g)
	}
	if err != nil {
		return games.GameError("read game", err)
	}
	if len(resp.GetGames()) == 0 {
		return apierr.New(apierr.NotFound, "game %s is no longer kept by the game service", g.ID)
	}
	return over(g.ID, resp.GetGames()[0].GetStatus())
}

// endedAsSeat is ended through GetGame, with the first seat's credential.
func (h *Handler) endedAsSeat(ctx context.Context, g store.Game) error {
	rctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+g.First.Seat.Token)
	resp, err := h.games.Game().GetGame(rctx, &gamev1.GetGameRequest{GameId: g.ID})
	if err != nil {
		return games.GameError("read game", err)
	}
	return over(g.ID, resp.GetGame().GetStatus())
}

// over refuses a rematch of a game that is still running.
func over(id string, s commonv1.GameStatus) error {
	switch s {
	case commonv1.GameStatus_GAME_STATUS_ENDED, commonv1.GameStatus_GAME_STATUS_ABORTED:
		return nil
	}
	return apierr.New(apierr.Precondition, "game %s is still running", id)
}

// OfferRematch offers a rematch, or accepts the opponent's offer.
func (h *Handler) OfferRematch(ctx context.Context, req *matchmakingv1.OfferRematchRequest) (*matchmakingv1.OfferRematchResponse, error) {
	c, err := h.player(ctx)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	g, err := h.gameOf(ctx, c.Subject, req.GetGameId())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	// A retry of the offer that made the rematch is answered with it, even
	// once g is no longer kept, as AcceptRematch's retry is.
	if done, err := h.recordedRematch(ctx, g, c.Subject); err != nil || done != nil {
		if err != nil {
			return nil, h.fail(ctx, err)
		}
		return &matchmakingv1.OfferRematchResponse{Rematch: done}, nil
	}
	if err := h.ended(ctx, g); err != nil {
		return nil, h.fail(ctx, err)
	}
	// Each rematch is a game kept for weeks, aborted at once or not: two
	// players' offers and answers could make them without end. An offer
	// made again for the same game counts once.
	if err := h.admit(ctx, store.Made{Player: c.Subject, What: "rematch", Request: g.ID}, h.cfg.Invites, "you", "rematch offer", "rematch offers"); err != nil {
		return nil, h.fail(ctx, err)
	}
	out, err := h.store.OfferRematch(ctx, g.ID, c.Subject, h.now(), h.cfg.RematchWindow, h.cfg.GameKeep)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	if out.Go {
		r, err := h.createRematch(ctx, g, c.Subject)
		if err != nil {
			return nil, h.fail(ctx, err)
		}
		return &matchmakingv1.OfferRematchResponse{Rematch: r}, nil
	}
	if err := h.store.Publish(ctx, rematchTopic(g.ID)); err != nil {
		h.log.WarnContext(ctx, "notify rematch offer", "err", err)
	}
	return &matchmakingv1.OfferRematchResponse{Rematch: &matchmakingv1.Rematch{
		GameId: g.ID, State: matchmakingv1.RematchState_REMATCH_STATE_OFFERED, OfferedBy: out.By, ExpiresAt: ts(out.Expires), OfferId: offerID(out.Expires, out.Offer),
	}}, nil
}

// AcceptRematch accepts the opponent's pending offer.
func (h *Handler) AcceptRematch(ctx context.Context, req *matchmakingv1.AcceptRematchRequest) (*matchmakingv1.AcceptRematchResponse, error) {
	c, err := h.player(ctx)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	g, err := h.gameOf(ctx, c.Subject, req.GetGameId())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	out, err := h.store.AcceptRematch(ctx, g.ID, c.Subject, h.now(), h.cfg.GameKeep)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	if !out.Go {
		return nil, h.fail(ctx, apierr.New(apierr.Precondition, "no pending rematch offer from your opponent (none was made, or it expired, was declined or withdrawn)"))
	}
	r, err := h.createRematch(ctx, g, c.Subject)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	return &matchmakingv1.AcceptRematchResponse{Rematch: r}, nil
}

// DeclineRematch declines the opponent's pending offer, or withdraws the
// caller's own.
func (h *Handler) DeclineRematch(ctx context.Context, req *matchmakingv1.DeclineRematchRequest) (*matchmakingv1.DeclineRematchResponse, error) {
	c, err := h.player(ctx)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	// Malformed input is refused before the game is looked up.
	expires, offer, err := parseOfferID(req.GetOfferId())
	if err != nil {
		msg := "offer_id: required: the offer_id of the offer to decline, as OfferRematch or WatchRematch gives it"
		if req.GetOfferId() != "" {
			msg = fmt.Sprintf("offer_id: %.64q names no offer: pass the offer_id OfferRematch or WatchRematch gives", req.GetOfferId())
		}
		return nil, h.fail(ctx, apierr.New(apierr.Invalid, "%s", msg))
	}
	g, err := h.gameOf(ctx, c.Subject, req.GetGameId())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	r, out, err := h.store.DeclineRematch(ctx, g.ID, c.Subject, expires, offer, h.now())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	switch out {
	case store.AlreadyAccepted:
		return nil, h.fail(ctx, apierr.New(apierr.Precondition, "the rematch of game %s was already accepted: WatchRematch gives your seat in its game", g.ID))
	case store.NothingPending:
		return nil, h.fail(ctx, apierr.New(apierr.Precondition, "rematch offer %s of game %s is not pending: it expired, or another replaced it (WatchRematch shows the rematch now)", req.GetOfferId(), g.ID))
	}
	// Published on a retry too: the first call may have died before it.
	if err := h.store.Publish(ctx, rematchTopic(g.ID)); err != nil {
		h.log.WarnContext(ctx, "notify rematch declined", "err", err)
	}
	// The offer this call declined, whatever came since.
	return &matchmakingv1.DeclineRematchResponse{Rematch: rematchPB(g, r, c.Subject, h.now())}, nil
}

// createRematch creates (or finds again) the rematch of g with sides
// swapped, once both players' tickets in the queue are withdrawn, and
// returns it as player sees it. A rematch whose game is recorded is
// answered as it is: once the game service keeps the game no longer, the
// same request would make a new game under its id.
func (h *Handler) createRematch(ctx context.Context, g store.Game, player string) (*matchmakingv1.Rematch, error) {
	accepted, err := h.store.ReadRematch(ctx, g.ID)
	if err != nil {
		return nil, err
	}
	if done := h.answerRecorded(ctx, g, accepted, player); done != nil {
		return done, nil
	}
	h.withdrawTickets(ctx, accepted.AcceptingSince, g.First.ID, g.Second.ID)
	ng, err := h.games.CreateHuman(ctx, games.Spec{
		RequestID: games.RequestID("rm", g.ID), Kind: g.Kind, Control: g.Control, Rated: g.Rated, Public: g.Public,
		First:  games.Human{ID: g.Second.ID, Name: g.Second.Name, NamedAt: g.Second.NamedAt},
		Second: games.Human{ID: g.First.ID, Name: g.First.Name, NamedAt: g.First.NamedAt},
	})
	if err != nil {
		return nil, err
	}
	if err := h.store.CompleteRematch(ctx, g.ID, ng.ID, ng.First, ng.Second); err != nil {
		return nil, err
	}
	if err := h.store.Publish(ctx, rematchTopic(g.ID)); err != nil {
		h.log.WarnContext(ctx, "notify rematch", "err", err)
	}
	r, err := h.store.ReadRematch(ctx, g.ID)
	if err != nil {
		return nil, err
	}
	return rematchPB(g, r, player, h.now()), nil
}

// recordedRematch is the rematch of g as player sees it, with its seat's
// credential fresh, when its game is recorded; nil when it is not.
func (h *Handler) recordedRematch(ctx context.Context, g store.Game, player string) (*matchmakingv1.Rematch, error) {
	r, err := h.store.ReadRematch(ctx, g.ID)
	if err != nil {
		return nil, err
	}
	return h.answerRecorded(ctx, g, r, player), nil
}

// answerRecorded is r, the rematch of g, as player sees it, with its
// seat's credential fresh, when its game is recorded; nil when it is not.
func (h *Handler) answerRecorded(ctx context.Context, g store.Game, r store.Rematch, player string) *matchmakingv1.Rematch {
	if r.State != "accepted" || r.Game == "" {
		return nil
	}
	if s, ok := r.Seats[player]; ok {
		r.Seats[player] = h.fresh(ctx, r.Game, s)
	}
	return rematchPB(g, r, player, h.now())
}

// rematchStall is how long an accepted offer may go without its game
// before a watcher of the rematch completes it (settleStalledRematch).
const rematchStall = inviteStall

// settleStalledRematch completes a rematch whose offer was accepted at
// least rematchStall ago and whose game was never recorded: the
// accepting call died (its replica was killed, or the game service was
// down) and its client did not retry. Otherwise the other player would
// watch an offer that never ends, past its window. The game's request id
// makes it the game the accepter's retry gets.
func (h *Handler) settleStalledRematch(ctx context.Context, g store.Game, r store.Rematch, player string, now time.Time) store.Rematch {
	if r.State != "accepting" || now.Sub(r.AcceptingSince) < rematchStall {
		return r
	}
	cctx, cancel := bestEffort(ctx)
	defer cancel()
	if _, err := h.createRematch(cctx, g, player); err != nil {
		h.log.WarnContext(ctx, "complete stalled rematch", "game", g.ID, "err", err)
		return r
	}
	done, err := h.store.ReadRematch(ctx, g.ID)
	if err != nil {
		h.log.WarnContext(ctx, "read completed rematch", "game", g.ID, "err", err)
		return r
	}
	return done
}

// offerID names a rematch offer by its expiry and number: an offer of
// the previous release, unnumbered, is told apart by its expiry.
func offerID(expires time.Time, n int64) string {
	return strconv.FormatInt(expires.UnixMilli(), 10) + "-" + strconv.FormatInt(n, 10)
}

// parseOfferID reads what offerID wrote.
func parseOfferID(id string) (expires, n int64, err error) {
	e, num, ok := strings.Cut(id, "-")
	if !ok {
		return 0, 0, fmt.Errorf("offer id %q has no number", id)
	}
	if expires, err = strconv.ParseInt(e, 10, 64); err == nil {
		n, err = strconv.ParseInt(num, 10, 64)
	}
	return expires, n, err
}

func rematchPB(g store.Game, r store.Rematch, player string, now time.Time) *matchmakingv1.Rematch {
	out := &matchmakingv1.Rematch{GameId: g.ID, State: matchmakingv1.RematchState_REMATCH_STATE_NONE}
	switch r.State {
	case "offered", "accepting":
		if r.State == "accepting" || now.Before(r.Expires) {
			out.State, out.OfferedBy, out.ExpiresAt, out.OfferId = matchmakingv1.RematchState_REMATCH_STATE_OFFERED, r.By, ts(r.Expires), offerID(r.Expires, r.Offer)
		}
	case "declined":
		out.State, out.OfferedBy, out.DeclinedBy, out.OfferId = matchmakingv1.RematchState_REMATCH_STATE_DECLINED, r.By, r.DeclinedBy, offerID(r.Expires, r.Offer)
	case "accepted":
		out.State, out.OfferedBy = matchmakingv1.RematchState_REMATCH_STATE_ACCEPTED, r.By
		if s, ok := r.Seats[player]; ok {
			opp := g.First
			if player == g.First.ID {
				opp = g.Second
			}
			out.Seat = seatPB(r.Game, s, opp.ID, opp.Name)
		}
	}
	return out
}

// WatchRematch streams the rematch state of a game until a rematch is
// accepted or an offer expired.
func (h *Handler) WatchRematch(req *matchmakingv1.WatchRematchRequest, ss matchmakingv1.MatchmakingService_WatchRematchServer) error {
	ctx := ss.Context()
	c, err := h.player(ctx)
	if err != nil {
		return h.fail(ctx, err)
	}
	g, err := h.gameOf(ctx, c.Subject, req.GetGameId())
	if err != nil {
		return h.fail(ctx, err)
	}
	// Compared whole, not by state: an offer can expire and another (by
	// the other player, or again) take its place between two reads.
	var first, last *matchmakingv1.Rematch
	sawOffer := false
	// The game was checked above: the caller played it.
	return h.watch(ctx, c.Subject, rematchTopic(g.ID), nil, func(ctx context.Context, beat bool) (bool, bool, time.Duration, error) {
		r, err := h.store.ReadRematch(ctx, g.ID)
		if err != nil {
			return false, false, 0, err
		}
		now := h.now()
		r = h.settleStalledRematch(ctx, g, r, c.Subject, now)
		pb := h.answerRecorded(ctx, g, r, c.Subject)
		if pb == nil {
			pb = rematchPB(g, r, c.Subject, now)
		}
		if first == nil {
			first = pb
		}
		sent := last == nil || !proto.Equal(pb, last) || beat
		if sent {
			last = pb
			if err := ss.Send(&matchmakingv1.WatchRematchResponse{Rematch: pb}); err != nil {
				return false, false, 0, err
			}
		}
		switch pb.GetState() {
		case matchmakingv1.RematchState_REMATCH_STATE_ACCEPTED:
			return sent, true, 0, nil
		case matchmakingv1.RematchState_REMATCH_STATE_OFFERED:
			sawOffer = true
			if r.State == "accepting" {
				// Wake when a claim that has not completed by then stalled.
				return sent, false, max(r.AcceptingSince.Add(rematchStall).Sub(now), time.Second), nil
			}
			return sent, false, r.Expires.Sub(now) + time.Millisecond, nil
		}
		// NONE or DECLINED after an offer: it expired or was declined;
		// so is a decline the watch did not open on (an offer made and
		// withdrawn between two reads). Before one, the watch waits for
		// an offer (again).
		declinedSince := pb.GetState() == matchmakingv1.RematchState_REMATCH_STATE_DECLINED && !proto.Equal(pb, first)
		return sent, sawOffer || declinedSince, 0, nil
	})
}
