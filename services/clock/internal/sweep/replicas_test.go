package sweep

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/palacehq/palace/pkg/deadline"
	"github.com/palacehq/palace/pkg/redistest"
)

// fourShards is an index of four shards on the test's Redis, whose keys
// and the sweepers' go at the end of the test.
func fourShards(t *testing.T) (redis.UniversalClient, *deadline.Index) {
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	idx, err := deadline.New(rdb, prefix, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		keys := []string{prefix + "clock:replicas"}
		for sh := range 4 {
			keys = append(keys, idx.Key(sh), prefix+"dl:lease:{"+strconv.Itoa(sh)+"}")
		}
		rdb.Del(context.Background(), keys...)
	})
	return rdb, idx
}

// TestAReplicaJustStartedIsCountedWhileTheHeartbeatFails: a replica that
// has just started holds no lease yet. While the replica set cannot be
// written, the others count a replica it named only while it holds a
// lease, so that a dead one's shards are taken; they must still count one
// the set named lately, or the replica just started is shut out for the
// whole outage, the shards freed for it taken back.
func TestAReplicaJustStartedIsCountedWhileTheHeartbeatFails(t *testing.T) {
	rdb, idx := fourShards(t)
	ctx := context.Background()
	newReplica := func(id string) *Service {
		s, err := New(slog.New(slog.DiscardHandler), rdb, idx, slowGames{}, noop.NewMeterProvider().Meter("test"), Config{ReplicaID: id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Release(context.Background()); _ = s.Close() })
		return s
	}
	a := newReplica("a")
	a.tick(ctx) // a alone: takes the 4 shards
	b := newReplica("b")
	b.tick(ctx) // b heartbeats; nothing is free
	a.tick(ctx) // a sees b, short of its share: releases 2 for it
	if got := len(a.Owned()); got != 2 {
		t.Fatalf("a holds %d shards after seeing b, want 2", got)
	}
	// The replica set's node becomes unwritable before b's next tick.
	key := idx.Prefix() + "clock:replicas"
	rdb.Del(ctx, key)
	if err := rdb.Set(ctx, key, "not a sorted set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		a.tick(ctx)
		b.tick(ctx)
	}
	st, err := a.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(b.Owned()); got != 2 || !slices.Contains(st.Replicas, "b") {
		t.Fatalf("while the replica set is unwritable, the live replica b holds %d of 4 shards (a %d), and a's stats list replicas %v", got, len(a.Owned()), st.Replicas)
	}
}

// TestALeaselessReplicaIsForgottenOnceTheSetIsStale: past a heartbeat's
// window, a replica the last set read named that holds no lease is taken
// for dead, and its free shards are taken.
func TestALeaselessReplicaIsForgottenOnceTheSetIsStale(t *testing.T) {
	rdb, idx := fourShards(t)
	ctx := context.Background()
	cfg := Config{ReplicaID: "a", LeaseTTL: 600 * time.Millisecond, Tick: 100 * time.Millisecond}
	a, err := New(slog.New(slog.DiscardHandler), rdb, idx, slowGames{}, noop.NewMeterProvider().Meter("test"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Release(context.Background()); _ = a.Close() })
	// x heartbeats, never takes a lease, and dies.
	key := idx.Prefix() + "clock:replicas"
	if err := rdb.ZAdd(ctx, key, redis.Z{Score: float64(time.Now().UnixMilli()), Member: "x"}).Err(); err != nil {
		t.Fatal(err)
	}
	a.tick(ctx) // a sees x: takes its fair share, 2
	if got := len(a.Owned()); got != 2 {
		t.Fatalf("a holds %d shards beside x, want 2", got)
	}
	rdb.Del(ctx, key)
	if err := rdb.Set(ctx, key, "not a sorted set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	a.tick(ctx) // the read is recent: x still counts
	if got := len(a.Owned()); got != 2 {
		t.Fatalf("a holds %d shards right after the set became unwritable, want 2", got)
	}
	time.Sleep(cfg.withDefaults().aliveWindow() + 50*time.Millisecond)
	a.tick(ctx)
	if got := len(a.Owned()); got != 4 {
		t.Fatalf("a holds %d shards once the last read is older than a heartbeat counts, x holding none; want 4", got)
	}
}

// TestStatsNameThisReplicaWhenTheHeartbeatNeverSucceeded: GetStats'
// replicas are those "that sent a heartbeat recently, this one included"
// (clock.proto): a replica whose heartbeat has failed since it started
// counts itself, and sweeps as the only replica, and its stats say so.
func TestStatsNameThisReplicaWhenTheHeartbeatNeverSucceeded(t *testing.T) {
	rdb, idx := fourShards(t)
	ctx := context.Background()
	key := idx.Prefix() + "clock:replicas"
	if err := rdb.Set(ctx, key, "not a sorted set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	a, err := New(slog.New(slog.DiscardHandler), rdb, idx, slowGames{}, noop.NewMeterProvider().Meter("test"), Config{ReplicaID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Release(context.Background()); _ = a.Close() })
	for range 3 {
		a.tick(ctx)
	}
	st, err := a.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Owned()) != 4 {
		t.Fatalf("a holds %d of 4 shards, want 4", len(a.Owned()))
	}
	if !slices.Contains(st.Replicas, "a") {
		t.Errorf("replica a sweeps all 4 shards, counting itself, but its stats list replicas %q, not itself (\"this one included\")", st.Replicas)
	}
}

// TestStatsDropADeadReplicaTheSweeperNoLongerCounts: during a long
// heartbeat outage, a replica the last set read named that died (holds no
// lease) is no longer counted for the fair share, and GetStats no longer
// lists it among the replicas seen recently.
func TestStatsDropADeadReplicaTheSweeperNoLongerCounts(t *testing.T) {
	rdb, idx := fourShards(t)
	ctx := context.Background()
	cfg := Config{ReplicaID: "a", LeaseTTL: 600 * time.Millisecond, Tick: 100 * time.Millisecond}
	a, err := New(slog.New(slog.DiscardHandler), rdb, idx, slowGames{}, noop.NewMeterProvider().Meter("test"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Release(context.Background()); _ = a.Close() })
	key := idx.Prefix() + "clock:replicas"
	if err := rdb.ZAdd(ctx, key, redis.Z{Score: float64(time.Now().UnixMilli()), Member: "x"}).Err(); err != nil {
		t.Fatal(err)
	}
	a.tick(ctx)
	rdb.Del(ctx, key)
	if err := rdb.Set(ctx, key, "not a sorted set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// x is dead; the outage lasts ten heartbeat windows.
	deadline := time.Now().Add(10 * cfg.withDefaults().aliveWindow())
	for time.Now().Before(deadline) {
		a.tick(ctx)
		time.Sleep(cfg.Tick)
	}
	if got := len(a.Owned()); got != 4 {
		t.Fatalf("a holds %d of 4 shards, x dead: want 4", got)
	}
	st, err := a.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(st.Replicas, "x") {
		t.Errorf("x, dead and counted by no one for %v, is still listed in a's stats as a replica seen recently: %q", 10*cfg.withDefaults().aliveWindow(), st.Replicas)
	}
}
