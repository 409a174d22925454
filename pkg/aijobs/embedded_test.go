package aijobs

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
)

// embeddedRedis starts the in-process Redis exactly as `palace serve`
// does without --redis-addr (pkg/app/run.go connectRedis): miniredis on a
// free loopback port.
func embeddedRedis(t *testing.T) redis.UniversalClient {
	t.Helper()
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mr.Close)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// retriedTwice queues one job on rdb with MaxAttempts 3, has a worker
// take it and Retry it (a failed try: engine crash, game service error)
// twice, and returns the third delivery: it must be the job, at its third
// attempt, since it was tried only twice.
func retriedTwice(t *testing.T, rdb redis.UniversalClient, prefix string) (*Delivery, error) {
	t.Helper()
	ctx := context.Background()
	q := New(rdb, prefix)
	q.ClaimAfter = time.Minute
	q.MaxAttempts = 3
	t.Cleanup(func() { rdb.Del(ctx, q.key, q.bgKey, q.dead, q.lanesKey()) })
	if err := q.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, Job{GameID: "g", Version: 1, Kind: KindMove, Side: "second", Level: 1}); err != nil {
		t.Fatal(err)
	}
	for try := int64(1); try <= 2; try++ {
		d, err := q.Next(ctx, "w", 10*time.Millisecond)
		if err != nil || d == nil || d.Attempt != try {
			t.Fatalf("delivery %d: %+v %v; want the job at attempt %d", try, d, err, try)
		}
		if err := q.Retry(ctx, "w", d, 0); err != nil {
			t.Fatal(err)
		}
	}
	return q.Next(ctx, "w", 10*time.Millisecond)
}

// TestARetryCountsOnceOnEitherRedis: a job handed back with Retry is
// counted once more when it is next delivered (MaxAttempts). On the
// in-process Redis of `palace serve` (make run; this test starts one as it
// does) the hand back itself counted another delivery, since XCLAIM ...
// JUSTID raises the count there: every try counted twice, a job was
// dead-lettered after half its --ai-job-attempts, the AI never moving in
// that game, and retry delays grew twice as fast.
func TestARetryCountsOnceOnEitherRedis(t *testing.T) {
	t.Run("real redis", func(t *testing.T) {
		d, err := retriedTwice(t, redistest.Client(t), redistest.Prefix(t))
		if err != nil || d == nil || d.Attempt != 3 {
			t.Fatalf("third delivery after two retries: %+v %v; want the job at attempt 3", d, err)
		}
	})
	t.Run("embedded redis", func(t *testing.T) {
		d, err := retriedTwice(t, embeddedRedis(t), "")
		if err != nil || d == nil || d.Attempt != 3 {
			t.Fatalf("third delivery after two retries: %+v %v; want the job at attempt 3 (MaxAttempts 3), not dead-lettered", d, err)
		}
	})
}
