package matchmaking_test

import (
	"context"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
)

// TestARematchOfferIsDeclinedOrWithdrawn: the opponent declines an offer,
// or its maker withdraws it, at once rather than by letting its window
// run out; the offerer's watch is told who, and ends, and either player
// may offer again.
func TestARematchOfferIsDeclinedOrWithdrawn(t *testing.T) {
	e := newEnv(t, 1, nil)
	a, b := e.guest("A"), e.guest("B")
	sa, _ := e.friendGame(a, b)
	game := sa.GetGameId()
	decline := func(p player) (*matchmakingv1.Rematch, error) {
		r, err := e.mm[0].DeclineRematch(p.ctx(), &matchmakingv1.DeclineRematchRequest{GameId: game})
		return r.GetRematch(), err
	}
	e.resign(t, sa)

	_, err := decline(b)
	wantCode(t, err, codes.FailedPrecondition) // nothing offered
	_, err = decline(e.guest("C"))
	wantCode(t, err, codes.PermissionDenied)
	_, err = e.mm[0].DeclineRematch(b.ctx(), &matchmakingv1.DeclineRematchRequest{GameId: "nosuchgame"})
	wantCode(t, err, codes.NotFound)
	_, err = e.mm[0].DeclineRematch(b.ctx(), &matchmakingv1.DeclineRematchRequest{})
	wantCode(t, err, codes.InvalidArgument)

	if _, err := e.mm[0].OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: game}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(a.ctx(), 10*time.Second)
	defer cancel()
	ws, err := e.mm[0].WatchRematch(ctx, &matchmakingv1.WatchRematchRequest{GameId: game})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := ws.Recv(); err != nil || first.GetRematch().GetState() != matchmakingv1.RematchState_REMATCH_STATE_OFFERED {
		t.Fatalf("the watch began with %v %v, want A's offer", first, err)
	}

	declined := func(r *matchmakingv1.Rematch, by player) bool {
		return r.GetState() == matchmakingv1.RematchState_REMATCH_STATE_DECLINED && r.GetOfferedBy() == a.id && r.GetDeclinedBy() == by.id
	}
	r, err := decline(b)
	if err != nil || !declined(r, b) {
		t.Fatalf("B declining A's offer: %v %v", r, err)
	}
	var last *matchmakingv1.Rematch
	for {
		m, err := ws.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("A's watch, after %v: %v", last, err)
		}
		last = m.GetRematch()
	}
	if !declined(last, b) {
		t.Fatalf("A's watch ended on %v, want B's decline", last)
	}
	if r, err := decline(b); err != nil || !declined(r, b) {
		t.Fatalf("a retry of the decline: %v %v", r, err)
	}
	_, err = e.mm[0].AcceptRematch(b.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: game})
	wantCode(t, err, codes.FailedPrecondition)

	// A offers again, and withdraws.
	if r, err := e.mm[0].OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: game}); err != nil || r.GetRematch().GetState() != matchmakingv1.RematchState_REMATCH_STATE_OFFERED || r.GetRematch().GetDeclinedBy() != "" {
		t.Fatalf("A's second offer: %v %v", r, err)
	}
	if r, err := decline(a); err != nil || !declined(r, a) {
		t.Fatalf("A withdrawing the offer: %v %v", r, err)
	}
	_, err = e.mm[0].AcceptRematch(b.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: game})
	wantCode(t, err, codes.FailedPrecondition)

	// B's own offer, accepted, can no longer be declined.
	if _, err := e.mm[0].OfferRematch(b.ctx(), &matchmakingv1.OfferRematchRequest{GameId: game}); err != nil {
		t.Fatal(err)
	}
	acc, err := e.mm[0].AcceptRematch(a.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: game})
	if err != nil || acc.GetRematch().GetState() != matchmakingv1.RematchState_REMATCH_STATE_ACCEPTED {
		t.Fatalf("A accepting B's offer: %v %v", acc, err)
	}
	for _, p := range []player{a, b} {
		_, err = decline(p)
		wantCode(t, err, codes.FailedPrecondition)
	}
	again, err := e.mm[0].AcceptRematch(a.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: game})
	if err != nil || again.GetRematch().GetSeat().GetGameId() != acc.GetRematch().GetSeat().GetGameId() {
		t.Fatalf("the rematch after the refused declines: %v %v, want game %s", again, err, acc.GetRematch().GetSeat().GetGameId())
	}
}
