package aijobs

import (
	"context"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/redistest"
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
