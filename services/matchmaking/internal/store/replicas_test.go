package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/clock"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/redisx"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// A match completed while the replica is held back stays among the
// matches being created, so that it is taken over as stalled, and its
// watchers hear of it only once a later completion is confirmed.
func TestUnconfirmedFinishIsTakenOverAsStalled(t *testing.T) {
	ctx := context.Background()
	pair, st, pool, m, notes := pairedWithAReplica(t)
	now := time.Now()
	grant := store.Grant{Side: "first", Token: "t", Expires: now.Add(time.Hour)}
	finish := func() (bool, error) { return st.Finish(ctx, pool, m, "g1", grant, grant, now, time.Hour, nil, 0) }

	pair.Link.Blackhole()
	if _, err := finish(); !errors.Is(err, redisx.ErrNotReplicated) {
		t.Fatalf("finish with the replica held back: %v, want ErrNotReplicated", err)
	}
	stalled, err := st.ClaimStalled(ctx, pool, now.Add(time.Minute), now, 10)
	if err != nil || len(stalled) != 1 || stalled[0] != m.ID {
		t.Fatalf("stalled matches after an unconfirmed finish: %v (%v), want %s", stalled, err, m.ID)
	}
	select {
	case msg := <-notes.Channel():
		t.Fatalf("watchers told of an unconfirmed finish: %q", msg.Payload)
	case <-time.After(100 * time.Millisecond):
	}

	pair.Link.Restore()
	deadline := time.Now().Add(10 * time.Second)
	for {
		did, err := finish()
		if err == nil {
			if did {
				t.Fatal("the retry reports finishing a match the first attempt finished")
			}
			break
		}
		if !errors.Is(err, redisx.ErrNotReplicated) || time.Now().After(deadline) {
			t.Fatalf("finish once the replica is back: %v", err)
		}
	}
	select {
	case msg := <-notes.Channel():
		if msg.Payload != m.A+","+m.B {
			t.Fatalf("watchers told %q, want %q", msg.Payload, m.A+","+m.B)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watchers not told of the confirmed finish")
	}
	if stalled, err := st.ClaimStalled(ctx, pool, now.Add(time.Minute), now, 10); err != nil || len(stalled) != 0 {
		t.Fatalf("stalled matches after the confirmed finish: %v (%v), want none", stalled, err)
	}
	a, b, err := st.Tickets(ctx, pool, m)
	if err != nil || a.State != store.StateMatched || b.State != store.StateMatched || a.Game != "g1" {
		t.Fatalf("tickets %+v %+v (%v): want both matched to g1", a, b, err)
	}
}

// A match given up while the replica is held back stays among the
// matches being created, so that it is given up again, and its watchers
// hear of it only once that is confirmed.
func TestUnconfirmedGiveUpIsDoneAgain(t *testing.T) {
	ctx := context.Background()
	pair, st, pool, m, notes := pairedWithAReplica(t)
	now := time.Now()
	pair.Link.Blackhole()
	if _, err := st.Void(ctx, pool, m, now, time.Hour); !errors.Is(err, redisx.ErrNotReplicated) {
		t.Fatalf("give up with the replica held back: %v, want ErrNotReplicated", err)
	}
	if stalled, err := st.ClaimStalled(ctx, pool, now.Add(time.Minute), now, 10); err != nil || len(stalled) != 1 || stalled[0] != m.ID {
		t.Fatalf("stalled matches after an unconfirmed give-up: %v (%v), want %s", stalled, err, m.ID)
	}
	select {
	case msg := <-notes.Channel():
		t.Fatalf("watchers told of an unconfirmed give-up: %q", msg.Payload)
	case <-time.After(100 * time.Millisecond):
	}
	pair.Link.Restore()
	for deadline := time.Now().Add(10 * time.Second); ; {
		v, err := st.Void(ctx, pool, m, now, time.Hour)
		if err == nil {
			if !v.GaveUp {
				t.Fatal("the retry found the match's game recorded")
			}
			break
		}
		if !errors.Is(err, redisx.ErrNotReplicated) || time.Now().After(deadline) {
			t.Fatalf("give up once the replica is back: %v", err)
		}
	}
	select {
	case msg := <-notes.Channel():
		if msg.Payload != m.A+","+m.B {
			t.Fatalf("watchers told %q, want %q", msg.Payload, m.A+","+m.B)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watchers not told of the confirmed give-up")
	}
	if stalled, err := st.ClaimStalled(ctx, pool, now.Add(time.Minute), now, 10); err != nil || len(stalled) != 0 {
		t.Fatalf("stalled matches after the confirmed give-up: %v (%v), want none", stalled, err)
	}
	if a, b, err := st.Tickets(ctx, pool, m); err != nil || a.State != store.StateExpired || b.State != store.StateExpired {
		t.Fatalf("tickets %+v %+v (%v): want both expired", a, b, err)
	}
}

// pairedWithAReplica pairs two tickets through a store whose writes wait
// for a replica (which the test may hold back through the pair's link),
// and listens where the tickets' watchers are told.
func pairedWithAReplica(t *testing.T) (redistest.Pair, *store.Store, store.Pool, store.Match, *redis.PubSub) {
	t.Helper()
	ctx := context.Background()
	pair := redistest.NewPair(t)
	master := pair.Master.Client(t)
	st := store.New(master, redistest.Prefix(t))
	st.Replication = redisx.Replication{Replicas: 1, Timeout: 200 * time.Millisecond}
	pool := store.Pool{Kind: janggi, Control: clock.Default()}
	now := time.Now()
	for _, p := range []string{"ann", "bo"} {
		if _, out, err := st.Enter(ctx, pool, store.Ticket{Player: p, Name: p, Rating: 1200, Entered: now, Expires: now.Add(time.Hour)}, "r", time.Hour, nil); err != nil || out != store.Entered {
			t.Fatalf("Enter %s: %v %v", p, out, err)
		}
	}
	res := st.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: now, BaseWindow: 100, MaxPairs: 10, Keep: time.Hour})
	if len(res) != 1 || res[0].Err != nil || len(res[0].Matches) != 1 {
		t.Fatalf("pairing pass: %+v", res)
	}
	notes := master.Subscribe(ctx, st.Channel())
	t.Cleanup(func() { _ = notes.Close() })
	if _, err := notes.Receive(ctx); err != nil { // the subscription is in place
		t.Fatal(err)
	}
	return pair, st, pool, res[0].Matches[0], notes
}
