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

// seatWorks reads the game with the seat's credential.
func seatWorks(e *env, s *matchmakingv1.Seat) error {
	_, err := e.game.Client.GetGame(as(s.GetToken()), &gamev1.GetGameRequest{GameId: s.GetGameId()})
	return err
}

// TestEverySeatAnsweredFromARecordIsFresh: with seat credentials shorter
// lived than the records that answer them (--seat-ttl is the operator's),
// every answer naming the caller's seat of a recorded game carries a
// credential that works. The friend's retried AcceptInvite and a retried
// OfferRematch did; the creator's WatchInvite and retried CreateInvite,
// and WatchRematch, handed out the credential recorded at creation,
// expired: the way an app learns of the game after its player came back.
func TestEverySeatAnsweredFromARecordIsFresh(t *testing.T) {
	e := newEnvOn(t, redistest.Addr(t), func(c *game.Config) { c.SeatTTL = 3 * time.Second }, 1, nil)
	host, friend := e.guest("Host"), e.guest("Friend")
	req := &matchmakingv1.CreateInviteRequest{RequestId: rid(), Kind: janggi}
	cr, err := e.mm[0].CreateInvite(host.ctx(), req)
	if err != nil {
		t.Fatal(err)
	}
	tok := cr.GetInvite().GetToken()
	if _, err := e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: tok}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3500 * time.Millisecond)
	// The friend's retry: fresh.
	fr, err := e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	if err := seatWorks(e, fr.GetInvite().GetSeat()); err != nil {
		t.Fatalf("friend's retried accept: %v", err)
	}
	// The creator learns of the game from the watch (or a retried create).
	w, err := e.mm[0].WatchInvite(host.ctx(), &matchmakingv1.WatchInviteRequest{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	wr, err := w.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if err := seatWorks(e, wr.GetInvite().GetSeat()); err != nil {
		t.Errorf("the creator's seat from WatchInvite: %v", err)
	}
	again, err := e.mm[0].CreateInvite(host.ctx(), req)
	if err != nil {
		t.Fatal(err)
	}
	if err := seatWorks(e, again.GetInvite().GetSeat()); err != nil {
		t.Errorf("the creator's seat from a retried CreateInvite: %v", err)
	}

	// A rematch of that game: a retried offer is fresh, the watch is not.
	hs := wr.GetInvite().GetSeat()
	if _, err := e.game.Client.Resign(as(fr.GetInvite().GetSeat().GetToken()), &gamev1.ResignRequest{GameId: hs.GetGameId(), RequestId: rid()}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.mm[0].OfferRematch(host.ctx(), &matchmakingv1.OfferRematchRequest{GameId: hs.GetGameId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.mm[0].AcceptRematch(friend.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: hs.GetGameId()}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3500 * time.Millisecond)
	or, err := e.mm[0].OfferRematch(host.ctx(), &matchmakingv1.OfferRematchRequest{GameId: hs.GetGameId()})
	if err != nil {
		t.Fatal(err)
	}
	if err := seatWorks(e, or.GetRematch().GetSeat()); err != nil {
		t.Fatalf("retried OfferRematch: %v", err)
	}
	ws, err := e.mm[0].WatchRematch(friend.ctx(), &matchmakingv1.WatchRematchRequest{GameId: hs.GetGameId()})
	if err != nil {
		t.Fatal(err)
	}
	wrr, err := ws.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if err := seatWorks(e, wrr.GetRematch().GetSeat()); err != nil {
		t.Errorf("the seat from WatchRematch: %v", err)
	}
}
