package handler

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/apierr"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/services/matchmaking/internal/games"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// MaxGameIDBytes is the game service's limit on a game id.
const MaxGameIDBytes = 64

// ListGames lists the games matchmaking made for the caller, newest
// first.
func (h *Handler) ListGames(ctx context.Context, req *matchmakingv1.ListGamesRequest) (*matchmakingv1.ListGamesResponse, error) {
	c, err := h.player(ctx)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	// No more are kept: asking for more is asking for all.
	limit := store.MaxPlayerGames
	if n := req.GetMaxGames(); n > 0 && n < store.MaxPlayerGames {
		limit = int(n)
	}
	entries, err := h.store.PlayerGames(ctx, c.Subject, h.now().Add(-h.cfg.GameKeep), limit)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	out := &matchmakingv1.ListGamesResponse{Games: make([]*matchmakingv1.GameEntry, 0, len(entries))}
	if len(entries) == 0 {
		return out, nil
	}
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.Game
	}
	// Where each game is now: the game service's to say, in one call
	// (a list keeps no more games than that call takes).
	gctx, cancel := bestEffort(ctx)
	now, err := h.games.Game().GetGames(gctx, &gamev1.GetGamesRequest{GameIds: ids})
	cancel()
	if err != nil {
		// The list is matchmaking's own: it is answered without where
		// the games are (as for games no longer kept) rather than not at
		// all, while the game service cannot say (out of reach, or of a
		// release before GetGames during an upgrade).
		h.log.WarnContext(ctx, "list games: the game service did not say where they are; listed without", "err", err)
	}
	found := make(map[string]*gamev1.Game, len(now.GetGames()))
	for _, g := range now.GetGames() {
		found[g.GetGameId()] = g
	}
	for _, e := range entries {
		entry := &matchmakingv1.GameEntry{
			GameId: e.Game, Kind: e.Kind, Side: games.SidePB(e.Side), OpponentId: e.Opponent, OpponentName: e.OpponentName,
			Rated: e.Rated, TimeControl: store.ControlPB(e.Control), CreatedAt: ts(e.Created),
		}
		if g := found[e.Game]; g != nil {
			entry.Status, entry.Result, entry.EndedAt = g.GetStatus(), g.GetResult(), g.GetEndedAt()
			if st := g.GetStatus(); st == commonv1.GameStatus_GAME_STATUS_SETUP || st == commonv1.GameStatus_GAME_STATUS_ONGOING {
				entry.Turn = g.GetTurn()
			}
		}
		out.Games = append(out.Games, entry)
	}
	return out, nil
}

// ResumeGame has the game service issue a new credential for the caller's
// seat in a game. Any game in which the caller's player id holds a seat
// qualifies, listed or not (a tournament system's, one older than the
// list): the game service decides, not matchmaking's records.
func (h *Handler) ResumeGame(ctx context.Context, req *matchmakingv1.ResumeGameRequest) (*matchmakingv1.ResumeGameResponse, error) {
	c, err := h.player(ctx)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	id := req.GetGameId()
	if err := checkID("game_id", id, MaxGameIDBytes); err != nil {
		return nil, h.fail(ctx, err)
	}
	// One answer for an unknown game and a game of others: the caller
	// learns nothing of games it does not play.
	notFound := apierr.New(apierr.NotFound, "no game %s with a seat of yours", id)
	resp, err := h.games.Game().IssueSeatCredentials(ctx, &gamev1.IssueSeatCredentialsRequest{GameId: id, PlayerId: c.Subject})
	switch status.Code(err) {
	case codes.OK:
	case codes.NotFound:
		return nil, h.fail(ctx, notFound)
	case codes.FailedPrecondition:
		// The caller's id is the one the game gave its AI seat (a
		// tournament system names its seats as it likes): no seat of the
		// caller's to resume.
		return nil, h.fail(ctx, notFound)
	default:
		return nil, h.fail(ctx, games.GameError("issue seat credentials", err))
	}
	creds := resp.GetCredentials()
	if len(creds) == 0 {
		return nil, h.fail(ctx, fmt.Errorf("issue seat credentials for game %s: the game service returned none", id))
	}
	// A player holding both seats (an operator's game against oneself)
	// resumes the first, Cho's or Red's.
	cred, g := creds[0], resp.GetGame()
	seat := &matchmakingv1.Seat{
		GameId: id, Side: cred.GetSide(), Token: cred.GetToken(), TokenExpiresAt: cred.GetExpiresAt(),
	}
	for _, s := range g.GetSeats() {
		if s.GetSide() == cred.GetSide() {
			continue
		}
		seat.OpponentId, seat.OpponentName = s.GetPlayerId(), s.GetDisplayName()
		if s.GetAiLevel() > 0 {
			// As PlayAi names it, whoever created the game.
			seat.OpponentId = games.AIPlayerID
		}
	}
	return &matchmakingv1.ResumeGameResponse{Seat: seat, Status: g.GetStatus()}, nil
}
