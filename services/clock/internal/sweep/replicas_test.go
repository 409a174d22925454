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

// newSweeper is a sweeper on rdb and idx, released and closed at the end
// of the test; the test runs its ticks.
func newSweeper(t *testing.T, rdb redis.UniversalClient, idx *deadline.Index, cfg Config) *Service {
	s, err := New(slog.New(slog.DiscardHandler), rdb, idx, slowGames{}, noop.NewMeterProvider().Meter("test"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Release(context.Background()); _ = s.Close() })
	return s
}

// breakReplicaSet makes the replica set unwritable (its node down, say).
func breakReplicaSet(t *testing.T, rdb redis.UniversalClient, idx *deadline.Index) {
	key := idx.Prefix() + "clock:replicas"
	rdb.Del(context.Background(), key)
	if err := rdb.Set(context.Background(), key, "not a sorted set", 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// besideALeaselessReplica is a sweeper "a" (a short lease) that has seen
// a replica "x" heartbeat, which never takes a lease: x died at once.
func besideALeaselessReplica(t *testing.T) (*Service, Config, redis.UniversalClient, *deadline.Index) {
	rdb, idx := fourShards(t)
	cfg := Config{ReplicaID: "a", LeaseTTL: 600 * time.Millisecond, Tick: 100 * time.Millisecond}
	a := newSweeper(t, rdb, idx, cfg)
	if err := rdb.ZAdd(context.Background(), idx.Prefix()+"clock:replicas", redis.Z{Score: float64(time.Now().UnixMilli()), Member: "x"}).Err(); err != nil {
		t.Fatal(err)
	}
	a.tick(context.Background())
	return a, cfg, rdb, idx
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
	a := newSweeper(t, rdb, idx, Config{ReplicaID: "a"})
	a.tick(ctx) // a alone: takes the 4 shards
	b := newSweeper(t, rdb, idx, Config{ReplicaID: "b"})
	b.tick(ctx) // b heartbeats; nothing is free
	a.tick(ctx) // a sees b, short of its share: releases 2 for it
	if got := len(a.Owned()); got != 2 {
		t.Fatalf("a holds %d shards after seeing b, want 2", got)
	}
	// The replica set's node becomes unwritable before b's next tick.
	breakReplicaSet(t, rdb, idx)
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
	a, cfg, rdb, idx := besideALeaselessReplica(t)
	ctx := context.Background()
	if got := len(a.Owned()); got != 2 {
		t.Fatalf("a holds %d shards beside x, want 2", got)
	}
	breakReplicaSet(t, rdb, idx)
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
	breakReplicaSet(t, rdb, idx)
	a := newSweeper(t, rdb, idx, Config{ReplicaID: "a"})
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
		t.Errorf("replica a sweeps all 4 shards, counting itself, but its stats list replicas %q, not itself", st.Replicas)
	}
}

// TestStatsDropADeadReplicaTheSweeperNoLongerCounts: during a long
// heartbeat outage, a replica the last set read named that died (holds no
// lease) is no longer counted for the fair share, and GetStats no longer
// lists it among the replicas seen recently.
func TestStatsDropADeadReplicaTheSweeperNoLongerCounts(t *testing.T) {
	a, cfg, rdb, idx := besideALeaselessReplica(t)
	ctx := context.Background()
	breakReplicaSet(t, rdb, idx)
	outage := 10 * cfg.withDefaults().aliveWindow()
	for end := time.Now().Add(outage); time.Now().Before(end); time.Sleep(cfg.Tick) {
		a.tick(ctx)
	}
	if got := len(a.Owned()); got != 4 {
		t.Fatalf("a holds %d of 4 shards, x dead: want 4", got)
	}
	st, err := a.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(st.Replicas, "x") {
		t.Errorf("x, dead and counted by no one for %v, is still listed in a's stats as a replica seen recently: %q", outage, st.Replicas)
	}
}
