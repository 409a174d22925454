package store_test

import (
	"context"
	"errors"
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
		wait, err := s.Admit(ctx, store.Made{Player: player, What: what, Request: req}, b, at)
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
		if w, err := s.Admit(ctx, store.Made{Player: "p", What: "ai", Request: fmt.Sprint("free", i)}, store.Bound{}, t0); w != 0 || err != nil {
			t.Fatalf("unbounded: %v %v", w, err)
		}
	}
}

// TestAdmitHoldsARequestIDToItsRequest: a request id admitted with one
// fingerprint is refused with another, bound or no bound, and neither
// the refusal nor a request refused for want of room holds anything.
func TestAdmitHoldsARequestIDToItsRequest(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	t0 := time.UnixMilli(1_700_000_000_000)
	for _, b := range []store.Bound{{}, {Most: 2, Window: time.Minute}} {
		player := fmt.Sprint("p", b.Most)
		made := func(req, fp string) store.Made {
			return store.Made{Player: player, What: "ai", Request: req, Fingerprint: fp, Keep: time.Hour}
		}
		if w, err := s.Admit(ctx, made("r1", "janggi/4"), b, t0); w != 0 || err != nil {
			t.Fatalf("bound %v: first: %v %v", b, w, err)
		}
		if w, err := s.Admit(ctx, made("r1", "janggi/4"), b, t0); w != 0 || err != nil {
			t.Fatalf("bound %v: the same request again: %v %v", b, w, err)
		}
		if _, err := s.Admit(ctx, made("r1", "janggi/5"), b, t0); !errors.Is(err, store.ErrOtherRequest) {
			t.Fatalf("bound %v: the same id for another request: %v, want ErrOtherRequest", b, err)
		}
		if w, err := s.Admit(ctx, made("r2", "janggi/5"), b, t0); w != 0 || err != nil {
			t.Fatalf("bound %v: the other request under its own id: %v %v (the refusal counted?)", b, w, err)
		}
		if !b.On() {
			continue
		}
		// Refused for want of room, r3 holds nothing: asked again with
		// another fingerprint once there is room, it is admitted.
		if w, _ := s.Admit(ctx, made("r3", "janggi/6"), b, t0); w != time.Minute {
			t.Fatalf("the third in a window of two waits %v, want 1m", w)
		}
		if w, err := s.Admit(ctx, made("r3", "janggi/7"), b, t0.Add(time.Minute)); w != 0 || err != nil {
			t.Fatalf("r3 with another fingerprint once there is room: %v %v", w, err)
		}
	}
}

// TestAdmitAfterTheBoundIsLowered: with more admitted than a lowered
// bound allows, the wait said lasts until there is room indeed.
func TestAdmitAfterTheBoundIsLowered(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	t0 := time.UnixMilli(1_700_000_000_000)
	for i := range 4 {
		if w, err := s.Admit(ctx, store.Made{Player: "p", What: "ai", Request: fmt.Sprint("r", i)}, store.Bound{Most: 4, Window: time.Minute}, t0.Add(time.Duration(i)*time.Second)); w != 0 || err != nil {
			t.Fatal(w, err)
		}
	}
	low := store.Bound{Most: 2, Window: time.Minute}
	w, err := s.Admit(ctx, store.Made{Player: "p", What: "ai", Request: "r9"}, low, t0.Add(10*time.Second))
	if err != nil || w != 52*time.Second {
		t.Fatalf("wait %v (%v), want 52s: until three of the four have left", w, err)
	}
	if w, _ := s.Admit(ctx, store.Made{Player: "p", What: "ai", Request: "r9"}, low, t0.Add(10*time.Second+w)); w != 0 {
		t.Fatalf("refused again after the wait said: %v", w)
	}
}
