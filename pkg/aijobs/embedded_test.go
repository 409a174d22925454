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

// TestStraysOnTheEmbeddedRedis: the in-process Redis of make run lists a
// consumer's strays (XPENDING ... consumer) and takes their count from the
// hand back's ARGV (RETRYCOUNT): a stray tried once before, handed back,
// comes to the next worker at its second attempt.
func TestStraysOnTheEmbeddedRedis(t *testing.T) {
	ctx := context.Background()
	rdb := embeddedRedis(t)
	q := New(rdb, "")
	q.ClaimAfter, q.Lease = time.Hour, 0
	if err := q.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"g1", "g2"} {
		if err := q.Enqueue(ctx, Job{GameID: g, Version: 1, Kind: KindMove, Side: "second", Level: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// g1: tried once by w1 and retried; then w taken it over (reply lost).
	d, err := q.Next(ctx, "w1", 10*time.Millisecond)
	if err != nil || d == nil || d.Job.GameID != "g1" {
		t.Fatalf("%+v %v", d, err)
	}
	if err := q.Retry(ctx, "w1", d, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: q.key, Group: q.group, Consumer: "w", Start: "0-0", Count: 1}).Result(); err != nil {
		t.Fatal(err)
	}
	// g2: read by w, reply lost.
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: q.group, Consumer: "w", Streams: []string{q.key, ">"}, Count: 1, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	q.doubt("w")
	s, err := q.Strays(ctx, "w")
	if err != nil || len(s) != 2 {
		t.Fatalf("strays %+v %v, want 2", s, err)
	}
	for _, d := range s {
		if err := q.Postpone(ctx, "w", d, 0); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int64{}
	for range 2 {
		d, err := q.Next(ctx, "w3", 10*time.Millisecond)
		if err != nil || d == nil {
			t.Fatalf("%+v %v", d, err)
		}
		got[d.Job.GameID] = d.Attempt
	}
	if got["g1"] != 2 || got["g2"] != 1 {
		t.Fatalf("attempts %v, want g1 at 2, g2 at 1", got)
	}
}
