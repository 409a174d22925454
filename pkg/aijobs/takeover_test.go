package aijobs

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestJobsOfAKilledProcessAreAllTakenOverWithinTheLease: when a worker
// process running several workers (aid --ai-workers 6) is killed while
// each of its workers holds a job, the idle workers of another process,
// looking as Worker.Run does (Next with a 1 s wait, again and again),
// take over every one of those jobs as soon as the default 3 s lease
// lapses, not one per look interval: the AI's clock runs in each of
// those games, and docs/ai.md promises them taken over within about 5 s
// of the death.
func TestJobsOfAKilledProcessAreAllTakenOverWithinTheLease(t *testing.T) {
	const n = 6
	ctx := context.Background()
	q, rdb := testQueue(t, time.Hour) // the claim timeout plays no part
	killed := New(rdb, q.prefix)
	killed.ClaimAfter = q.ClaimAfter
	var dead []string
	for i := range n {
		enqueue(t, q, playerJob(fmt.Sprintf("g%d", i)))
		w := fmt.Sprintf("killed-%d", i)
		dead = append(dead, w)
		if err := killed.KeepAlive(ctx, w); err != nil {
			t.Fatal(err)
		}
		if d, err := killed.Next(ctx, w, 10*time.Millisecond); err != nil || d == nil {
			t.Fatalf("%s's delivery %+v %v", w, d, err)
		}
	}
	// The process dies now: its leases are never renewed again.
	death := time.Now()
	t.Cleanup(func() {
		for _, w := range dead {
			rdb.Del(ctx, q.aliveKey(w))
		}
	})

	var mu sync.Mutex
	var took []time.Duration
	var wg sync.WaitGroup
	stop, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for i := range n {
		name := fmt.Sprintf("survivor-%d", i)
		wg.Go(func() {
			for stop.Err() == nil {
				_ = q.KeepAlive(stop, name)
				d, err := q.Next(stop, name, time.Second)
				if err != nil || d == nil {
					continue
				}
				mu.Lock()
				took = append(took, time.Since(death))
				mu.Unlock()
				// Busy with it from now on, renewing its lease.
				for stop.Err() == nil {
					_ = q.KeepAlive(stop, name)
					time.Sleep(500 * time.Millisecond)
				}
				return
			}
		})
	}
	for {
		mu.Lock()
		done := len(took) == n
		mu.Unlock()
		if done || stop.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	t.Logf("taken over after %v (death at 0; lease %v)", took, q.Lease)
	if len(took) != n {
		t.Fatalf("%d of %d jobs taken over within 15 s of the death", len(took), n)
	}
	if last := took[n-1]; last > 5*time.Second {
		t.Fatalf("the last of the killed process's %d jobs was taken over %v after the death, want within about 5 s (lease %v): %v", n, last.Round(time.Millisecond), q.Lease, took)
	}
}
