package aijobs

import (
	"context"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/redistest"
)

// TestNextWaitsNoLongerThanASubMillisecondBlock: Next waits "up to block"
// for a job. A block below a millisecond, sent as such, would be
// XREADGROUP BLOCK 0, which Redis reads as "wait for ever".
func TestNextWaitsNoLongerThanASubMillisecondBlock(t *testing.T) {
	for _, tc := range []struct {
		name  string
		block time.Duration
	}{
		{"half a millisecond", 500 * time.Microsecond},
		{"zero", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rdb := redistest.Client(t)
			q := New(rdb, redistest.Prefix(t))
			t.Cleanup(func() { rdb.Del(ctx, q.key, q.bgKey) })
			if err := q.Ensure(ctx); err != nil {
				t.Fatal(err)
			}
			// Should Next wait for ever, a job queued later releases it, so
			// the test ends either way.
			release := time.AfterFunc(3*time.Second, func() {
				_ = q.Enqueue(context.Background(), Job{GameID: "late", Version: 1, Kind: KindMove, Side: "first", Level: 1})
			})
			defer release.Stop()
			start := time.Now()
			d, err := q.Next(ctx, "w", tc.block)
			took := time.Since(start)
			if took > time.Second {
				t.Fatalf("Next(block %v) on an empty queue returned after %v (%+v, %v), want at most about the block", tc.block, took.Round(time.Millisecond), d, err)
			}
		})
	}
}
