package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// TestAdmit: a player makes at most Most things of a kind in a sliding
// window; a retry of an admitted request is admitted again without
// counting; the refusal says when the oldest leaves the window; players
// and kinds count apart.
func TestAdmit(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	b := store.Bound{Most: 3, Window: time.Minute}
	t0 := time.UnixMilli(1_700_000_000_000)
	admit := func(player, what, req string, at time.Time) time.Duration {
		t.Helper()
		wait, err := s.Admit(ctx, player, what, req, b, at)
		if err != nil {
			t.Fatal(err)
		}
		return wait
	}
	for i := range 3 {
		if w := admit("p", "ai", fmt.Sprint("r", i), t0.Add(time.Duration(i)*time.Second)); w != 0 {
			t.Fatalf("request %d refused for %v within the bound", i, w)
		}
	}
	if w := admit("p", "ai", "r3", t0.Add(10*time.Second)); w != 50*time.Second {
		t.Fatalf("the fourth in a window waits %v, want 50s (until the first leaves it)", w)
	}
	if w := admit("p", "ai", "r1", t0.Add(10*time.Second)); w != 0 {
		t.Fatalf("a retry of an admitted request was refused for %v", w)
	}
	if w := admit("q", "ai", "r3", t0.Add(10*time.Second)); w != 0 {
		t.Fatalf("another player was refused for %v", w)
	}
	if w := admit("p", "invite", "r3", t0.Add(10*time.Second)); w != 0 {
		t.Fatalf("another kind was refused for %v", w)
	}
	// Once the first leaves the window there is room for one.
	if w := admit("p", "ai", "r3", t0.Add(time.Minute)); w != 0 {
		t.Fatalf("refused for %v once the first left the window", w)
	}
	if w := admit("p", "ai", "r4", t0.Add(time.Minute)); w != time.Second {
		t.Fatalf("the next waits %v, want 1s", w)
	}
	// No bound: everything is admitted.
	for i := range 10 {
		if w, err := s.Admit(ctx, "p", "ai", fmt.Sprint("free", i), store.Bound{}, t0); w != 0 || err != nil {
			t.Fatalf("unbounded: %v %v", w, err)
		}
	}
}
