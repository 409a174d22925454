package redisx_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/redisx"
)

// TestTimedReadsNeitherWaitNorPileUp: a read that does not come back is
// waited for no longer than the timeout, and while it is under way the
// next scrapes start no other read.
func TestTimedReadsNeitherWaitNorPileUp(t *testing.T) {
	reads := redisx.NewTimedReads(50 * time.Millisecond)
	release, started := make(chan struct{}), 0
	stuck := func(context.Context) error { started++; <-release; return nil }
	begin := time.Now()
	if err := reads.Do(context.Background(), stuck); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read that does not come back: %v; want DeadlineExceeded", err)
	}
	if took := time.Since(begin); took > time.Second {
		t.Fatalf("waited %v for a read bounded at 50ms", took)
	}
	if err := reads.Do(context.Background(), stuck); !errors.Is(err, redisx.ErrReadUnderWay) {
		t.Fatalf("a scrape while a read is under way: %v; want ErrReadUnderWay", err)
	}
	close(release)
	ok := func(context.Context) error { return nil }
	for until := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		err := reads.Do(context.Background(), ok)
		if err == nil {
			break
		}
		if time.Now().After(until) {
			t.Fatalf("reads after the stuck one came back: %v", err)
		}
	}
	if started != 1 {
		t.Fatalf("the stuck read was started %d times; want once", started)
	}
}

// TestAReadThatComesBackInTimeIsNeverTakenForLate: a read that comes back
// within the timeout hands back what it read, however soon it comes back:
// its end must never pass for the timeout's, or a scrape would report
// Redis out of reach while it answers.
func TestAReadThatComesBackInTimeIsNeverTakenForLate(t *testing.T) {
	var late atomic.Int64
	var wg sync.WaitGroup
	until := time.Now().Add(time.Second)
	for range 8 {
		wg.Go(func() {
			reads := redisx.NewTimedReads(time.Minute)
			for time.Now().Before(until) && late.Load() == 0 {
				v, err := redisx.TimedRead(context.Background(), reads, func(context.Context) (int, error) { return 1, nil })
				if err != nil || v != 1 {
					late.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := late.Load(); n > 0 {
		t.Fatalf("%d reads that came back at once were taken for late", n)
	}
}
