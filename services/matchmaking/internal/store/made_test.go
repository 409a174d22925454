package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
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

// TestAbortWait: a player's aborted rated games count for an hour after
// they ended against its entering a rated queue of their kind; each game
// once, however often its ending is counted, and one settled more than
// an hour late not at all; with more than the bound, the wait lasts until
// all but most - 1 have left.
func TestAbortWait(t *testing.T) {
	s, rdb, prefix := playerGamesStore(t)
	ctx := context.Background()
	janggi, xiangqi := commonv1.GameKind_GAME_KIND_JANGGI, commonv1.GameKind_GAME_KIND_XIANGQI
	t0 := time.UnixMilli(1_700_000_000_000)
	count := func(g string, at, now time.Time) {
		t.Helper()
		if _, err := s.CountAbort(ctx, janggi, g, "p", "", at, now); err != nil {
			t.Fatal(err)
		}
	}
	// g0 ended two hours ago, and is settled only now.
	count("g0", t0.Add(-2*time.Hour), t0)
	for i, g := range []string{"g1", "g2", "g2", "g3"} {
		at := t0.Add(time.Duration(i) * 10 * time.Minute)
		// Settled a little late: the wait runs from when the game ended.
		count(g, at, at.Add(5*time.Second))
	}
	// g1 at 0, g2 at 10 min, g3 at 30 min; it is now 40 min.
	now := t0.Add(40 * time.Minute)
	for _, tt := range []struct {
		most int
		want time.Duration
		n    int
	}{
		{0, 0, 0}, {4, 0, 3}, {3, 20 * time.Minute, 3}, {2, 30 * time.Minute, 3}, {1, 50 * time.Minute, 3},
	} {
		w, n, err := s.AbortWait(ctx, janggi, "p", tt.most, now)
		if err != nil || w != tt.want || n != tt.n {
			t.Errorf("most %d: wait %v with %d (%v), want %v with %d", tt.most, w, n, err, tt.want, tt.n)
		}
	}
	if w, n, err := s.AbortWait(ctx, janggi, "p", 3, t0.Add(60*time.Minute)); w != 0 || n != 2 || err != nil {
		t.Errorf("once g1 has left the hour: %v with %d (%v), want room with 2", w, n, err)
	}
	if w, _, _ := s.AbortWait(ctx, xiangqi, "p", 1, now); w != 0 {
		t.Errorf("the other kind waits %v", w)
	}
	if w, _, _ := s.AbortWait(ctx, janggi, "q", 1, now); w != 0 {
		t.Errorf("another player waits %v", w)
	}
	// The log keeps what is left of the hour and no more.
	key := prefix + "mm:{r:janggi}:recentaborts:p"
	if n := rdb.ZCard(ctx, key).Val(); n != 3 {
		t.Errorf("the log holds %d aborts, want 3", n)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("the log expires in %v, want within the hour", ttl)
	}
	count("g4", t0.Add(2*time.Hour), t0.Add(2*time.Hour))
	if n := rdb.ZCard(ctx, key).Val(); n != 1 {
		t.Errorf("two hours on, the log holds %d aborts, want the new one", n)
	}
}

// TestAnAbortIsCountedOnce: the ending of an aborted game counted twice
// (two followers of the game, each finding it pending) counts once
// against the player's aborts.
func TestAnAbortIsCountedOnce(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	janggi := commonv1.GameKind_GAME_KIND_JANGGI
	now := time.Now()
	for i, want := range []bool{true, false} {
		counted, err := s.CountAbort(ctx, janggi, "g", "p", "", now, now)
		if err != nil || counted != want {
			t.Fatalf("count %d: %v %v, want %v", i+1, counted, err, want)
		}
	}
	if r, err := s.PlayerRating(ctx, janggi, "p"); err != nil || r.Aborts != 1 {
		t.Fatalf("p's aborts %+v %v, want 1", r, err)
	}
}
