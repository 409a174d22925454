package clock_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/palacehq/palace/pkg/deadline"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/clock/internal/sweep"
	"github.com/palacehq/palace/services/game/gametest"
)

// replica is a clock replica run directly, so a test can kill it without
// the clean shutdown that releases its leases.
type replica struct {
	*sweep.Service
	kill context.CancelFunc
	done chan struct{}
}

func runReplica(t *testing.T, env *gametest.Env, id string, cfg sweep.Config) *replica {
	t.Helper()
	idx, err := deadline.New(env.Redis, env.Config.KeyPrefix, env.Config.DeadlineShards)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ReplicaID = id
	s, err := sweep.New(slog.New(slog.DiscardHandler), env.Redis, idx, env.Client, noop.NewMeterProvider().Meter("test"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{Service: s, kill: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		_ = s.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
		_ = s.Release(context.Background())
		_ = s.Close()
	})
	return r
}

// waitShares waits until the replicas hold exactly the given numbers of
// shards, with no shard held twice.
func waitShares(t *testing.T, want map[*replica]int) {
	t.Helper()
	stop := time.Now().Add(endWithin)
	for {
		seen := map[int]bool{}
		ok := true
		var got []int
		for r, n := range want {
			o := r.Owned()
			got = append(got, len(o))
			ok = ok && len(o) == n
			for _, sh := range o {
				ok = ok && !seen[sh]
				seen[sh] = true
			}
		}
		if ok {
			return
		}
		if time.Now().After(stop) {
			t.Fatalf("shares %v, want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplicaDeathHandsShardsOver kills a replica without releasing its
// leases (as a crash would): the other replica takes its shards over
// when the leases expire and flags its games. A replica that joins later
// gets a fair share handed over.
func TestReplicaDeathHandsShardsOver(t *testing.T) {
	t.Parallel()
	env := startGame(t, true)
	shards := env.Config.DeadlineShards
	// A long lease so that the test can see the dead replica's leases
	// still standing, however slow the machine.
	cfg := sweep.Config{LeaseTTL: 2 * time.Second, Tick: 100 * time.Millisecond}
	a := runReplica(t, env, "a", cfg)
	b := runReplica(t, env, "b", cfg)
	waitShares(t, map[*replica]int{a: shards / 2, b: shards / 2})

	idx, _ := deadline.New(env.Redis, env.Config.KeyPrefix, shards)
	n := 32
	tables := make([]*table, n)
	var wg sync.WaitGroup
	for i := range tables {
		wg.Go(func() {
			tables[i] = create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer(3 * time.Second)})
			tables[i].play(t, firstMoves...)
		})
	}
	wg.Wait()
	ofA := a.Owned()
	a.kill()
	<-a.done
	inA := 0
	for _, tb := range tables {
		if slices.Contains(ofA, idx.ShardOf(tb.id)) {
			inA++
		}
	}
	if inA == 0 {
		t.Fatal("no game landed in the killed replica's shards; use more games")
	}
	for _, sh := range ofA {
		owner, _ := env.Redis.Get(context.Background(), env.Config.KeyPrefix+"dl:lease:{"+itoa(int64(sh))+"}").Result()
		if owner != "a" {
			t.Fatalf("shard %d: lease held by %q right after the kill, want the dead replica's, not released", sh, owner)
		}
	}
	for _, tb := range tables {
		g := tb.waitEnded(t)
		if g.GetResult().GetMethod() != commonv1.EndMethod_END_METHOD_TIMEOUT {
			t.Fatalf("game %s ended by %v", tb.id, g.GetResult().GetMethod())
		}
		if k := gameEnds(tb.events(t)); k != 1 {
			t.Fatalf("game %s has %d GameEnded events", tb.id, k)
		}
	}
	waitShares(t, map[*replica]int{b: shards})
	t.Logf("%d of %d games were in the killed replica's shards", inA, n)

	// A new replica joins: the survivor hands half of the shards over.
	c := runReplica(t, env, "c", cfg)
	waitShares(t, map[*replica]int{b: shards / 2, c: shards / 2})
	late := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer(time.Second)})
	late.play(t, firstMoves...)
	if g := late.waitEnded(t); g.GetResult().GetMethod() != commonv1.EndMethod_END_METHOD_TIMEOUT {
		t.Fatalf("game after the rebalance ended by %v", g.GetResult().GetMethod())
	}
}

// TestAReplicaWhoseHeartbeatFailsStillTakesFreeShards: the replica set is
// one key, on one node of a Redis Cluster; while it cannot be written,
// a replica must still take the free shards, whose leases live elsewhere,
// or their games would go unswept. Here the key holds the wrong type.
func TestAReplicaWhoseHeartbeatFailsStillTakesFreeShards(t *testing.T) {
	t.Parallel()
	env := startGame(t, true)
	if err := env.Redis.Set(context.Background(), env.Config.KeyPrefix+"clock:replicas", "not a sorted set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	a := runReplica(t, env, "a", sweep.Config{LeaseTTL: 2 * time.Second, Tick: 100 * time.Millisecond})
	waitShares(t, map[*replica]int{a: env.Config.DeadlineShards})
}

// TestADeadReplicasShardsAreTakenWhileTheHeartbeatFails: while the
// replica set cannot be written, a replica uses the last set it read,
// which named a replica that died since: the survivor counted the dead
// one live and short of its share (it holds none of its shards any more),
// so it took none of the dead replica's free shards, and the games in
// them were never flagged. A remembered replica counts only while it
// holds a lease.
func TestADeadReplicasShardsAreTakenWhileTheHeartbeatFails(t *testing.T) {
	t.Parallel()
	env := startGame(t, true)
	shards := env.Config.DeadlineShards
	cfg := sweep.Config{LeaseTTL: 600 * time.Millisecond, Tick: 100 * time.Millisecond}
	a := runReplica(t, env, "a", cfg)
	x := runReplica(t, env, "x", cfg)
	waitShares(t, map[*replica]int{a: shards / 2, x: shards / 2})

	// A game in one of x's shards, its clock running.
	idx, _ := deadline.New(env.Redis, env.Config.KeyPrefix, shards)
	ofX := x.Owned()
	var tb *table
	for range 200 {
		c := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer(2 * time.Second)})
		if slices.Contains(ofX, idx.ShardOf(c.id)) {
			tb = c
			break
		}
	}
	if tb == nil {
		t.Fatal("no game landed in x's shards")
	}
	tb.play(t, firstMoves...)

	// The node of the replica set becomes unwritable, then x dies
	// without releasing its leases.
	ctx := context.Background()
	key := env.Config.KeyPrefix + "clock:replicas"
	if err := env.Redis.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := env.Redis.Set(ctx, key, "not a sorted set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a few ticks with the heartbeat failing
	x.kill()
	<-x.done

	stop := time.Now().Add(10 * time.Second)
	for len(a.Owned()) != shards && time.Now().Before(stop) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := len(a.Owned()); got != shards {
		g := tb.get(t)
		t.Fatalf("10 s after x died (lease TTL %v), the survivor holds %d of %d shards; game %s in x's shard %d: status %v, deadline %v ago",
			cfg.LeaseTTL, got, shards, tb.id, idx.ShardOf(tb.id), g.GetStatus(), time.Since(g.GetClocks().GetDeadline().AsTime()).Round(time.Second))
	}
	tb.waitEnded(t)
}
