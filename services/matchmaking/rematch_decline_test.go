package matchmaking_test

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// rematchOf is a finished game between two guests, for rematches.
type rematchOf struct {
	e    *env
	a, b player
	game string
}

func newRematchOf(t *testing.T) rematchOf {
	e := newEnv(t, 1, nil)
	a, b := e.guest("A"), e.guest("B")
	sa, _ := e.friendGame(a, b)
	e.resign(t, sa)
	return rematchOf{e: e, a: a, b: b, game: sa.GetGameId()}
}

func (r rematchOf) offer(t *testing.T, p player) *matchmakingv1.Rematch {
	t.Helper()
	o, err := r.e.mm[0].OfferRematch(p.ctx(), &matchmakingv1.OfferRematchRequest{GameId: r.game})
	if err != nil || o.GetRematch().GetState() != matchmakingv1.RematchState_REMATCH_STATE_OFFERED || o.GetRematch().GetOfferedBy() != p.id || o.GetRematch().GetOfferId() == "" {
		t.Fatalf("%s's offer: %v %v", p.name, o, err)
	}
	return o.GetRematch()
}

// now is the rematch as p's watch first shows it.
func (r rematchOf) now(t *testing.T, p player) *matchmakingv1.Rematch {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx(), 5*time.Second)
	defer cancel()
	w, err := r.e.mm[0].WatchRematch(ctx, &matchmakingv1.WatchRematchRequest{GameId: r.game})
	if err != nil {
		t.Fatal(err)
	}
	m, err := w.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return m.GetRematch()
}

func (r rematchOf) decline(p player, offer string) (*matchmakingv1.Rematch, error) {
	d, err := r.e.mm[0].DeclineRematch(p.ctx(), &matchmakingv1.DeclineRematchRequest{GameId: r.game, OfferId: offer})
	return d.GetRematch(), err
}

// declined reports whether r is offer declined by p.
func declined(r, offer *matchmakingv1.Rematch, p player) bool {
	return r.GetState() == matchmakingv1.RematchState_REMATCH_STATE_DECLINED && r.GetOfferedBy() == offer.GetOfferedBy() &&
		r.GetOfferId() == offer.GetOfferId() && r.GetDeclinedBy() == p.id
}

// TestARematchOfferIsDeclinedOrWithdrawn: the opponent declines an offer,
// or its maker withdraws it, at once rather than by letting its window
// run out; the offerer's watch is told who, and ends, and either player
// may offer again.
func TestARematchOfferIsDeclinedOrWithdrawn(t *testing.T) {
	r := newRematchOf(t)
	e, a, b := r.e, r.a, r.b

	_, err := r.decline(b, "")
	wantCode(t, err, codes.InvalidArgument) // no offer named
	for _, id := range []string{"someday", "1", "1-", "-1"} {
		_, err = r.decline(b, id)
		wantCode(t, err, codes.InvalidArgument)
	}
	_, err = r.decline(b, "1-1")
	wantCode(t, err, codes.FailedPrecondition) // nothing offered
	_, err = r.decline(e.guest("C"), "1-1")
	wantCode(t, err, codes.PermissionDenied)
	_, err = e.mm[0].DeclineRematch(context.Background(), &matchmakingv1.DeclineRematchRequest{GameId: r.game, OfferId: "1-1"})
	wantCode(t, err, codes.Unauthenticated)
	_, err = e.mm[0].DeclineRematch(b.ctx(), &matchmakingv1.DeclineRematchRequest{GameId: "nosuchgame", OfferId: "1-1"})
	wantCode(t, err, codes.NotFound)
	// A malformed offer is refused as such, whatever the game: once
	// answered NotFound, or PermissionDenied for another's game.
	_, err = e.mm[0].DeclineRematch(b.ctx(), &matchmakingv1.DeclineRematchRequest{GameId: "nosuchgame"})
	wantCode(t, err, codes.InvalidArgument)
	_, err = r.decline(e.guest("D"), "")
	wantCode(t, err, codes.InvalidArgument)

	first := r.offer(t, a)
	ctx, cancel := context.WithTimeout(a.ctx(), 10*time.Second)
	defer cancel()
	ws, err := e.mm[0].WatchRematch(ctx, &matchmakingv1.WatchRematchRequest{GameId: r.game})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := ws.Recv(); err != nil || m.GetRematch().GetOfferId() != first.GetOfferId() {
		t.Fatalf("the watch began with %v %v, want A's offer", m, err)
	}
	if d, err := r.decline(b, first.GetOfferId()); err != nil || !declined(d, first, b) {
		t.Fatalf("B declining A's offer: %v %v", d, err)
	}
	if last := watchToEnd(t, ws); !declined(last, first, b) {
		t.Fatalf("A's watch ended on %v, want B's decline", last)
	}
	if d, err := r.decline(b, first.GetOfferId()); err != nil || !declined(d, first, b) {
		t.Fatalf("a retry of the decline: %v %v", d, err)
	}
	_, err = e.mm[0].AcceptRematch(b.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: r.game})
	wantCode(t, err, codes.FailedPrecondition)

	// A offers again, and withdraws.
	second := r.offer(t, a)
	if second.GetOfferId() == first.GetOfferId() || second.GetDeclinedBy() != "" {
		t.Fatalf("A's second offer %v, after the first %v", second, first)
	}
	if d, err := r.decline(a, second.GetOfferId()); err != nil || !declined(d, second, a) {
		t.Fatalf("A withdrawing the offer: %v %v", d, err)
	}
	_, err = e.mm[0].AcceptRematch(b.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: r.game})
	wantCode(t, err, codes.FailedPrecondition)

	// B's own offer, accepted, can no longer be declined.
	third := r.offer(t, b)
	acc, err := e.mm[0].AcceptRematch(a.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: r.game})
	if err != nil || acc.GetRematch().GetState() != matchmakingv1.RematchState_REMATCH_STATE_ACCEPTED {
		t.Fatalf("A accepting B's offer: %v %v", acc, err)
	}
	for _, p := range []player{a, b} {
		_, err = r.decline(p, third.GetOfferId())
		wantCode(t, err, codes.FailedPrecondition)
	}
	again, err := e.mm[0].AcceptRematch(a.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: r.game})
	if err != nil || again.GetRematch().GetSeat().GetGameId() != acc.GetRematch().GetSeat().GetGameId() {
		t.Fatalf("the rematch after the refused declines: %v %v, want game %s", again, err, acc.GetRematch().GetSeat().GetGameId())
	}
}

// watchToEnd reads a rematch watch to its end and returns its last state.
func watchToEnd(t *testing.T, ws matchmakingv1.MatchmakingService_WatchRematchClient) *matchmakingv1.Rematch {
	t.Helper()
	var last *matchmakingv1.Rematch
	for {
		m, err := ws.Recv()
		if err == io.EOF {
			return last
		}
		if err != nil {
			t.Fatalf("the watch, after %v: %v", last, err)
		}
		last = m.GetRematch()
	}
}

// TestARetriedWithdrawEndsNoLaterOffer: A withdrew its offer and the
// answer was lost; B, told by its watch, offered; A's retry of the
// withdraw, which named no offer, declined B's offer.
func TestARetriedWithdrawEndsNoLaterOffer(t *testing.T) {
	r := newRematchOf(t)
	mine := r.offer(t, r.a)
	if _, err := r.decline(r.a, mine.GetOfferId()); err != nil {
		t.Fatal(err)
	}
	r.offer(t, r.b)
	_, err := r.decline(r.a, mine.GetOfferId())
	wantCode(t, err, codes.FailedPrecondition)
	acc, err := r.e.mm[0].AcceptRematch(r.a.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: r.game})
	if err != nil || acc.GetRematch().GetState() != matchmakingv1.RematchState_REMATCH_STATE_ACCEPTED {
		t.Fatalf("B's offer, after a retry of A's withdraw of its own earlier offer: %v %v; want it still pending", acc, err)
	}
}

// TestADeclineAnswersItsDecline: the answer was read again after the
// decline, so an offer made in between was answered to the decliner
// (OFFERED), though its decline took effect.
func TestADeclineAnswersItsDecline(t *testing.T) {
	r := newRematchOf(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() && ctx.Err() == nil {
			r.e.mm[0].OfferRematch(r.a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: r.game})
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()
	done, wrong := 0, 0
	var bad *matchmakingv1.Rematch
	for i := 0; i < 300 && ctx.Err() == nil; i++ {
		offer := r.now(t, r.b)
		d, err := r.decline(r.b, offer.GetOfferId())
		if status.Code(err) == codes.FailedPrecondition || status.Code(err) == codes.InvalidArgument {
			continue // declined already, or not offered yet
		}
		if err != nil {
			t.Fatal(err)
		}
		done++
		if !declined(d, offer, r.b) {
			wrong++
			bad = d
		}
	}
	if wrong > 0 || done == 0 {
		t.Fatalf("%d of %d declines answered another state than theirs, e.g. %v", wrong, done, bad)
	}
}

// TestAWatchOpenBeforeAnOfferEndsOnItsDecline: a watch opened before any
// offer (NONE) that next read a decline (an offer made and withdrawn
// between two of its reads) took itself for one opened after the decline
// and waited on.
func TestAWatchOpenBeforeAnOfferEndsOnItsDecline(t *testing.T) {
	r := newRematchOf(t)
	ctx, cancel := context.WithTimeout(r.b.ctx(), 8*time.Second)
	defer cancel()
	ws, err := r.e.mm[0].WatchRematch(ctx, &matchmakingv1.WatchRematchRequest{GameId: r.game})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := ws.Recv(); err != nil || first.GetRematch().GetState() != matchmakingv1.RematchState_REMATCH_STATE_NONE {
		t.Fatalf("first: %v %v", first, err)
	}
	// Offered and withdrawn in the store, one announcement for the two.
	st := store.New(r.e.game.Redis, r.e.cfg.KeyPrefix)
	bg := context.Background()
	o, err := st.OfferRematch(bg, r.game, r.a.id, r.e.clock.Now(), time.Minute, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, out, err := st.DeclineRematch(bg, r.game, r.a.id, o.Expires.UnixMilli(), o.Offer, r.e.clock.Now()); err != nil || out != store.Declined {
		t.Fatalf("withdraw: %v %v", out, err)
	}
	if err := st.Publish(bg, "r:"+r.game); err != nil {
		t.Fatal(err)
	}
	if last := watchToEnd(t, ws); last.GetState() != matchmakingv1.RematchState_REMATCH_STATE_DECLINED {
		t.Fatalf("ended on %v", last)
	}
}

// TestOffersInOneMillisecondHaveTheirOwnIds: an offer was named by its
// expiry alone, the same for two offers made in one millisecond by the
// clocks of the replicas that took them, so a withdraw of the first,
// retried after the opponent's offer, ended the opponent's offer. Each
// offer is numbered too.
func TestOffersInOneMillisecondHaveTheirOwnIds(t *testing.T) {
	r := newRematchOf(t)
	mine := r.offer(t, r.a)
	if _, err := r.decline(r.a, mine.GetOfferId()); err != nil {
		t.Fatal(err)
	}
	// B's offer, taken by a replica whose clock reads what A's replica's
	// read at A's offer (a few ms behind it).
	at := mine.GetExpiresAt().AsTime().Add(-r.e.cfg.RematchWindow)
	st := store.New(r.e.game.Redis, r.e.cfg.KeyPrefix)
	bg := context.Background()
	theirs, err := st.OfferRematch(bg, r.game, r.b.id, at, r.e.cfg.RematchWindow, r.e.cfg.GameKeep)
	if err != nil || theirs.Go {
		t.Fatalf("B's offer: %+v %v", theirs, err)
	}
	if err := st.Publish(bg, "r:"+r.game); err != nil {
		t.Fatal(err)
	}
	now := r.now(t, r.a)
	if now.GetState() != matchmakingv1.RematchState_REMATCH_STATE_OFFERED || now.GetOfferedBy() != r.b.id {
		t.Fatalf("after B's offer: %v", now)
	}
	// A's withdraw, retried (its first answer lost).
	d, err := r.decline(r.a, mine.GetOfferId())
	if err == nil {
		t.Fatalf("A's retried withdraw of its own offer %s declined B's offer %s (the same id: both expire at the same ms): answered %v; want FailedPrecondition and B's offer still pending",
			mine.GetOfferId(), now.GetOfferId(), d)
	}
	wantCode(t, err, codes.FailedPrecondition)
}
