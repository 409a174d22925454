package matchmaking_test

import (
	"testing"
	"time"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game"
)

// The game service builds a game's id from its creation request, and
// keeps the request only as long as the game: the same creation sent once
// the game is gone makes a new game under the old id (CreateGame's proto
// says so). Matchmaking answered a late retry of AcceptRematch, PlayAi or
// AcceptInvite by sending the creation again, so a game that had ended
// came back to life, clocks running, listed as the old game. Here the game
// service keeps a finished game a second, as a --retention shorter than
// matchmaking's --game-keep would; a retry then is answered from what
// matchmaking recorded, and makes no game.

// shortRetention is an environment whose game service keeps a finished
// game one second.
func shortRetention(t *testing.T) *env {
	return newEnvOn(t, redistest.Addr(t), func(c *game.Config) { c.Retention = time.Second }, 1, nil)
}

// awaitGone waits until the game service no longer keeps the games.
func (e *env) awaitGone(t *testing.T, ids ...string) {
	t.Helper()
	eventually(t, 10*time.Second, "the games to expire", func() bool {
		r, err := e.game.Client.GetGames(t.Context(), &gamev1.GetGamesRequest{GameIds: ids})
		return err == nil && len(r.GetNotFound()) == len(ids)
	})
}

// wantNotMadeAgain fails the test if the game service keeps a game id
// again after a retry, and unless the retry answered the same game.
func (e *env) wantNotMadeAgain(t *testing.T, id, answered string, err error) {
	t.Helper()
	if err != nil || answered != id {
		t.Errorf("the retry answered game %q, %v; want the first answer's game %s", answered, err, id)
	}
	r, gerr := e.game.Client.GetGames(t.Context(), &gamev1.GetGamesRequest{GameIds: []string{id}})
	if gerr != nil {
		t.Fatal(gerr)
	}
	if len(r.GetGames()) > 0 {
		g := r.GetGames()[0]
		t.Errorf("game %s, which ended by resignation, is a game again after the retry: status %v, version %d", id, g.GetStatus(), g.GetVersion())
	}
}

// A rematch is made by AcceptRematch, or by the second of two offers
// (OfferRematch); a retry of either, once the games are gone, answers the
// rematch made and makes no game. OfferRematch's retry asked the game
// service first whether the finished game was over, and was refused
// NotFound once it was no longer kept.
func TestARematchRetriedOnceItsGameIsGoneMakesNoGame(t *testing.T) {
	for _, by := range []string{"AcceptRematch", "OfferRematch"} {
		t.Run(by, func(t *testing.T) {
			e := shortRetention(t)
			a, b := e.guest("Ann"), e.guest("Ben")
			sa, sb := e.friendGame(a, b)
			e.resign(t, sb)
			if _, err := e.mm[0].OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: sa.GetGameId()}); err != nil {
				t.Fatal(err)
			}
			// Ben's call that makes the rematch, sent again later.
			send := func() (*matchmakingv1.Rematch, error) {
				if by == "AcceptRematch" {
					r, err := e.mm[0].AcceptRematch(b.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: sa.GetGameId()})
					return r.GetRematch(), err
				}
				r, err := e.mm[0].OfferRematch(b.ctx(), &matchmakingv1.OfferRematchRequest{GameId: sa.GetGameId()})
				return r.GetRematch(), err
			}
			made, err := send()
			if err != nil || made.GetSeat().GetGameId() == "" {
				t.Fatalf("%s made no rematch: %v, %v", by, made, err)
			}
			rematch := made.GetSeat()
			e.resign(t, rematch)
			e.awaitGone(t, sa.GetGameId(), rematch.GetGameId())

			again, err := send()
			e.wantNotMadeAgain(t, rematch.GetGameId(), again.GetSeat().GetGameId(), err)
			if l := e.listGames(b, 1); len(l) == 1 && l[0].GetStatus() != commonv1.GameStatus_GAME_STATUS_UNSPECIFIED {
				t.Errorf("Ben's list shows the finished rematch as %v", l[0].GetStatus())
			}
		})
	}
}

func TestAPlayAiRetriedOnceItsGameIsGoneMakesNoGame(t *testing.T) {
	e := shortRetention(t)
	a := e.guest("Ann")
	req := &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: xiangqi, Level: 1, Side: commonv1.Side_SIDE_FIRST}
	r, err := e.mm[0].PlayAi(a.ctx(), req)
	if err != nil {
		t.Fatal(err)
	}
	seat := r.GetSeat()
	e.resign(t, seat)
	e.awaitGone(t, seat.GetGameId())

	again, err := e.mm[0].PlayAi(a.ctx(), req)
	e.wantNotMadeAgain(t, seat.GetGameId(), again.GetSeat().GetGameId(), err)
	if again.GetSeat().GetToken() != seat.GetToken() {
		t.Errorf("the retry's credential differs from the first answer's")
	}
	if l := e.listGames(a, 0); len(l) != 1 || l[0].GetStatus() != commonv1.GameStatus_GAME_STATUS_UNSPECIFIED {
		t.Errorf("Ann's list after the retry: %v, want the one game, no longer kept", l)
	}
}

func TestAnInviteAcceptRetriedOnceItsGameIsGoneMakesNoGame(t *testing.T) {
	e := shortRetention(t)
	host, friend := e.guest("Host"), e.guest("Friend")
	inv := e.invite(host)
	acc, err := e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()})
	if err != nil {
		t.Fatal(err)
	}
	seat := acc.GetInvite().GetSeat()
	e.resign(t, seat)
	e.awaitGone(t, seat.GetGameId())

	again, err := e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()})
	e.wantNotMadeAgain(t, seat.GetGameId(), again.GetInvite().GetSeat().GetGameId(), err)
}

// A retry answered from the record gets a credential that works: the
// game service freshens the credentials of a creation sent again once they
// are past half their life, and a retry of PlayAi answered from the record
// handed back the first answer's, run out, for a game still running.
func TestAPlayAiRetriedOnceItsCredentialRanOutGetsAFreshOne(t *testing.T) {
	const ttl = 3 * time.Second
	e := newEnvOn(t, redistest.Addr(t), func(c *game.Config) { c.SeatTTL = ttl }, 1, nil)
	a := e.guest("Ann")
	req := &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: xiangqi, Level: 1, Side: commonv1.Side_SIDE_FIRST}
	r, err := e.mm[0].PlayAi(a.ctx(), req)
	if err != nil {
		t.Fatal(err)
	}
	first := r.GetSeat()
	time.Sleep(time.Until(first.GetTokenExpiresAt().AsTime()) + 200*time.Millisecond)

	again, err := e.mm[0].PlayAi(a.ctx(), req)
	if err != nil {
		t.Fatal(err)
	}
	if again.GetSeat().GetGameId() != first.GetGameId() {
		t.Fatalf("the retry answered game %s, want %s", again.GetSeat().GetGameId(), first.GetGameId())
	}
	if exp := again.GetSeat().GetTokenExpiresAt().AsTime(); !exp.After(time.Now()) {
		t.Errorf("the retry of PlayAi for a game still running answered a credential that expired at %v (%v ago); the game service's retry answer freshens it", exp, time.Since(exp).Round(time.Millisecond))
	}
}
