package aijobs

import (
	"context"
	"testing"
	"time"
)

// TestARetriedJobComesBackAfterItsDelayAsAnotherDelivery: a job handed back
// for a retry by a live worker is handed out again once its delay has
// passed, long before the claim timeout (an hour here), and not before; the
// retry counts as a delivery, so that MaxAttempts still dead-letters a job
// that fails every time.
func TestARetriedJobComesBackAfterItsDelayAsAnotherDelivery(t *testing.T) {
	ctx := context.Background()
	q, rdb := testQueue(t, time.Hour)
	q.MaxAttempts = 2
	if err := q.KeepAlive(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(ctx, q.aliveKey("w")) })
	enqueue(t, q, playerJob("g"))
	d := nextWithin(t, q, "w", time.Second)
	if d == nil || d.Attempt != 1 {
		t.Fatalf("first delivery %+v", d)
	}

	const after = 300 * time.Millisecond
	if err := q.Retry(ctx, "w", d, after); err != nil {
		t.Fatal(err)
	}
	retried := time.Now()
	if again, err := q.Next(ctx, "w", 10*time.Millisecond); err != nil || again != nil {
		t.Fatalf("before its delay: %+v, %v; want nothing", again, err)
	}
	again := nextWithin(t, q, "w", 2*time.Second)
	took := time.Since(retried)
	if again == nil || again.ID != d.ID || again.Attempt != 2 {
		t.Fatalf("after the retry: %+v; want job %s, second delivery", again, d.ID)
	}
	if took < after {
		t.Fatalf("handed out again %v after the retry, before its delay of %v", took, after)
	}

	if err := q.Retry(ctx, "w", again, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if third := nextWithin(t, q, "w", 500*time.Millisecond); third != nil {
		t.Fatalf("a third delivery %+v; want the job dead-lettered after 2", third)
	}
	if n, err := q.Dead(ctx); err != nil || n != 1 {
		t.Fatalf("%d dead-lettered (%v), want 1", n, err)
	}
}
