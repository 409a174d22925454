package aijobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/redisx"
)

func TestQueueHandsOverAbandonedJobs(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	q := New(rdb, redistest.Prefix(t))
	q.ClaimAfter = 50 * time.Millisecond
	t.Cleanup(func() { rdb.Del(ctx, q.key) })
	if err := q.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Ensure(ctx); err != nil { // twice is fine
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, Job{GameID: "g1", Version: 7, Kind: KindMove, Side: "second", Level: 3}); err != nil {
		t.Fatal(err)
	}
	if n, _ := q.Depth(ctx); n != 1 {
		t.Fatalf("depth %d, want 1", n)
	}
	first, err := q.Next(ctx, "w1", 100*time.Millisecond)
	if err != nil || first == nil || first.Job.GameID != "g1" || first.Job.Version != 7 || first.Attempt != 1 {
		t.Fatalf("first delivery %+v %v", first, err)
	}
	// w1 dies without acknowledging; w2 gets nothing new at once...
	if d, err := q.Next(ctx, "w2", 10*time.Millisecond); err != nil || d != nil {
		t.Fatalf("job delivered twice before the claim timeout: %+v %v", d, err)
	}
	time.Sleep(80 * time.Millisecond)
	// ...then takes the abandoned job over.
	again, err := q.Next(ctx, "w2", 10*time.Millisecond)
	if err != nil || again == nil || again.ID != first.ID || again.Attempt != 2 {
		t.Fatalf("claimed delivery %+v %v", again, err)
	}
	if err := q.Done(ctx, again); err != nil {
		t.Fatal(err)
	}
	if n, _ := q.Depth(ctx); n != 0 {
		t.Fatalf("depth %d after done, want 0", n)
	}
	time.Sleep(80 * time.Millisecond)
	if d, err := q.Next(ctx, "w3", 10*time.Millisecond); err != nil || d != nil {
		t.Fatalf("a done job came back: %+v %v", d, err)
	}
}

// With Replication, a job is queued only once a replica holds it: a
// failover cannot strand a game on the AI's turn.
func TestEnqueueWaitsForReplicas(t *testing.T) {
	ctx := context.Background()
	pair := redistest.NewPair(t)
	onReplica := pair.Replica.Client(t)
	q := New(pair.Master.Client(t), "")
	q.Replication = redisx.Replication{Replicas: 1, Timeout: time.Second}
	if err := q.Enqueue(ctx, Job{GameID: "g1", Version: 3, Kind: KindMove, Side: "second", Level: 1}); err != nil {
		t.Fatalf("enqueue with the replica linked: %v", err)
	}
	if n, err := onReplica.XLen(ctx, q.key).Result(); err != nil || n != 1 {
		t.Fatalf("replica holds %d jobs (%v) once the enqueue returned, want 1", n, err)
	}
	pair.Link.Blackhole()
	if err := q.Enqueue(ctx, Job{GameID: "g2", Version: 3, Kind: KindMove, Side: "second", Level: 1}); !errors.Is(err, redisx.ErrNotReplicated) {
		t.Fatalf("enqueue with the replica behind: %v, want ErrNotReplicated", err)
	}
}
