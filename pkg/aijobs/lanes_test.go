package aijobs

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
)

func enqueue(t *testing.T, q *Queue, j Job) {
	t.Helper()
	if err := q.Enqueue(context.Background(), j); err != nil {
		t.Fatal(err)
	}
}

func bgJob(game string) Job {
	return Job{GameID: game, Version: 1, Kind: KindMove, Side: "first", Level: 1, Background: true}
}

func playerJob(game string) Job {
	return Job{GameID: game, Version: 1, Kind: KindMove, Side: "second", Level: 1}
}

// TestPlayersJobsComeBeforeBackgroundOnes: a worker takes the jobs of
// games a person plays before any background job queued earlier, and the
// background jobs once none of those waits, each lane in its order.
func TestPlayersJobsComeBeforeBackgroundOnes(t *testing.T) {
	ctx := context.Background()
	q, _ := testQueue(t, time.Minute)
	enqueue(t, q, bgJob("bg1"))
	enqueue(t, q, bgJob("bg2"))
	enqueue(t, q, playerJob("p1"))
	enqueue(t, q, playerJob("p2"))
	if d, err := q.Depths(ctx); err != nil || d != (Depths{Interactive: 2, Background: 2}) {
		t.Fatalf("depths %+v, %v; want 2 and 2", d, err)
	}
	if n, err := q.Depth(ctx); err != nil || n != 4 {
		t.Fatalf("depth %d, %v; want 4", n, err)
	}
	for i, want := range []string{"p1", "p2", "bg1", "bg2"} {
		d, err := q.Next(ctx, "w", 10*time.Millisecond)
		if err != nil || d == nil {
			t.Fatalf("job %d: %+v, %v; want %s", i, d, err, want)
		}
		if d.Job.GameID != want || d.Background() != strings.HasPrefix(want, "bg") || d.Attempt != 1 {
			t.Fatalf("job %d: %+v (background %v); want %s at its first attempt", i, d.Job, d.Background(), want)
		}
		// A player's job queued meanwhile still comes first.
		if want == "bg1" {
			enqueue(t, q, playerJob("p3"))
			if d, err := q.Next(ctx, "w", 10*time.Millisecond); err != nil || d == nil || d.Job.GameID != "p3" {
				t.Fatalf("with bg2 waiting, a new player's job: %+v, %v; want p3", d, err)
			}
		}
		if err := q.Done(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := q.Depths(ctx); err != nil || d.Background != 0 || d.Interactive != 1 {
		t.Fatalf("depths %+v, %v; want only p3, not acknowledged", d, err)
	}
}

// TestABackgroundJobIsHandedOverAsAPlayersIs: the claim timeout, a lapsed
// lease, a hand back and a dead letter work on a background job too, and
// act on its own lane.
func TestABackgroundJobIsHandedOverAsAPlayersIs(t *testing.T) {
	ctx := context.Background()
	q, rdb := testQueue(t, 300*time.Millisecond)
	q.Lease = 0
	enqueue(t, q, bgJob("bg"))
	first, err := q.Next(ctx, "w1", 10*time.Millisecond)
	if err != nil || first == nil || !first.Background() {
		t.Fatalf("first delivery %+v, %v", first, err)
	}
	// Abandoned: taken over once the claim timeout passed.
	second := nextWithin(t, q, "w2", 5*time.Second)
	if second == nil || second.ID != first.ID || second.Attempt != 2 || !second.Background() {
		t.Fatalf("after the claim timeout: %+v; want the job at its second attempt", second)
	}
	q.ClaimAfter = time.Minute
	if err := q.HandBack(ctx, "w2", second); err != nil {
		t.Fatal(err)
	}
	third, err := q.Next(ctx, "w3", 10*time.Millisecond)
	if err != nil || third == nil || third.ID != first.ID || third.Attempt != 3 {
		t.Fatalf("after the hand back: %+v, %v; want the job at its third attempt", third, err)
	}
	if err := q.Bury(ctx, third, "unplayable"); err != nil {
		t.Fatal(err)
	}
	dead, err := rdb.XRange(ctx, q.dead, "-", "+").Result()
	if err != nil || len(dead) != 1 || dead[0].Values["id"] != first.ID || dead[0].Values["lane"] != "background" {
		t.Fatalf("dead letters %+v, %v; want the job, from the background lane", dead, err)
	}
	if n, err := rdb.XLen(ctx, q.bgKey).Result(); err != nil || n != 0 {
		t.Fatalf("background stream holds %d jobs, %v; want none", n, err)
	}
	if p, err := rdb.XPending(ctx, q.bgKey, q.group).Result(); err != nil || p.Count != 0 {
		t.Fatalf("pending %+v, %v; want none", p, err)
	}
}

// TestABackgroundJobOfAWorkerWhoseLeaseLapsedIsTakenOver: the scan for
// the jobs of dead workers looks in the background lane too.
func TestABackgroundJobOfAWorkerWhoseLeaseLapsedIsTakenOver(t *testing.T) {
	ctx := context.Background()
	q, rdb := testQueue(t, time.Minute)
	q.Lease = 300 * time.Millisecond
	t.Cleanup(func() { rdb.Del(ctx, q.aliveKey("dead"), q.aliveKey("w2")) })
	if err := q.KeepAlive(ctx, "dead"); err != nil {
		t.Fatal(err)
	}
	enqueue(t, q, bgJob("bg"))
	first, err := q.Next(ctx, "dead", 10*time.Millisecond)
	if err != nil || first == nil {
		t.Fatalf("first delivery %+v, %v", first, err)
	}
	if err := q.KeepAlive(ctx, "w2"); err != nil {
		t.Fatal(err)
	}
	again := nextWithin(t, q, "w2", 5*time.Second)
	if again == nil || again.ID != first.ID || !again.Background() {
		t.Fatalf("taken over: %+v; want the dead worker's background job", again)
	}
}

// TestJobsArrivingInBothLanesAtOnce: a worker waiting for a job that
// wakes to one in each lane takes the player's, and the background one
// goes to the next worker at once, as if never handed out: with one
// delivery allowed, it is delivered, not dead-lettered.
func TestJobsArrivingInBothLanesAtOnce(t *testing.T) {
	ctx := context.Background()
	q, _ := testQueue(t, time.Minute)
	q.MaxAttempts = 1
	name := "lanes-" + redistest.Prefix(t)
	waiting := redis.NewClient(&redis.Options{Addr: redistest.Addr(t), ClientName: name})
	t.Cleanup(func() { waiting.Close() })
	wq := New(waiting, q.prefix)
	wq.ClaimAfter, wq.MaxAttempts = q.ClaimAfter, q.MaxAttempts

	got := make(chan *Delivery, 1)
	go func() {
		d, err := wq.Next(ctx, "w1", 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- d
	}()
	// Both jobs are added in one step once w1 waits in Redis.
	for blocked, end := false, time.Now().Add(10*time.Second); !blocked; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the worker never waited in Redis for a job")
		}
		list, err := q.rdb.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(list, "\n") {
			blocked = blocked || strings.Contains(line, " name="+name+" ") && strings.Contains(line, " cmd=xreadgroup")
		}
	}
	pipe := q.rdb.TxPipeline()
	pipe.XAdd(ctx, &redis.XAddArgs{Stream: q.bgKey, Values: []any{"j", `{"g":"bg","v":1,"k":"move","s":"first","l":1,"bg":true}`}})
	pipe.XAdd(ctx, &redis.XAddArgs{Stream: q.key, Values: []any{"j", `{"g":"p","v":1,"k":"move","s":"second","l":1}`}})
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	var d *Delivery
	select {
	case d = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting worker took no job")
	}
	if d == nil || d.Job.GameID != "p" {
		t.Fatalf("the waiting worker took %+v; want the player's job", d)
	}
	bg, err := q.Next(ctx, "w2", 10*time.Millisecond)
	if err != nil || bg == nil || bg.Job.GameID != "bg" || bg.Attempt != 1 {
		t.Fatalf("the next worker: %+v, %v; want the background job, at its first attempt", bg, err)
	}

	// Redis 7.2 and later answer a waiting read with every stream that
	// has a job by then, as a read that does not wait always does.
	enqueue(t, q, bgJob("bg2"))
	enqueue(t, q, playerJob("p2"))
	if d, err = q.read(ctx, "w1", -1, lanes[:]...); err != nil || d == nil || d.Job.GameID != "p2" {
		t.Fatalf("reading both lanes: %+v, %v; want the player's job", d, err)
	}
	if bg, err = q.Next(ctx, "w2", 10*time.Millisecond); err != nil || bg == nil || bg.Job.GameID != "bg2" || bg.Attempt != 1 {
		t.Fatalf("the next worker: %+v, %v; want the background job read beside it, at its first attempt", bg, err)
	}
}

// TestLeaveAndPruneSeeBothLanes: a worker holding a background job stays
// in the group until it is done, and then leaves both lanes; idle
// consumers of either lane are pruned.
func TestLeaveAndPruneSeeBothLanes(t *testing.T) {
	ctx := context.Background()
	q, rdb := testQueue(t, time.Minute)
	enqueue(t, q, bgJob("bg"))
	d, err := q.Next(ctx, "holding", 10*time.Millisecond)
	if err != nil || d == nil {
		t.Fatalf("job %+v, %v", d, err)
	}
	if left, err := q.Leave(ctx, "holding"); err != nil || left {
		t.Fatalf("Leave(holding) = %v, %v; want false: it holds a background job", left, err)
	}
	if err := q.Done(ctx, d); err != nil {
		t.Fatal(err)
	}
	if left, err := q.Leave(ctx, "holding"); err != nil || !left {
		t.Fatalf("Leave(holding) once done = %v, %v; want true", left, err)
	}
	for _, key := range []string{q.key, q.bgKey} {
		if cs, err := rdb.XInfoConsumers(ctx, key, q.group).Result(); err != nil || len(cs) != 0 {
			t.Fatalf("consumers of %s: %+v, %v; want none", key, cs, err)
		}
	}
	if err := rdb.XGroupCreateConsumer(ctx, q.bgKey, q.group, "gone").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if n, err := q.Prune(ctx, 10*time.Millisecond); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want the idle consumer of the background lane", n, err)
	}
}

// TestTheBackgroundLanesLostGroupIsMadeAgain: after Redis lost the
// background stream, a job queued there again is still taken.
func TestTheBackgroundLanesLostGroupIsMadeAgain(t *testing.T) {
	ctx := context.Background()
	q, rdb := testQueue(t, time.Minute)
	if err := rdb.Del(ctx, q.bgKey).Err(); err != nil {
		t.Fatal(err)
	}
	enqueue(t, q, bgJob("bg"))
	if d := nextWithin(t, q, "w", 5*time.Second); d == nil || d.Job.GameID != "bg" {
		t.Fatalf("after the loss: %+v; want the background job", d)
	}
}

// TestBackgroundJobsUseTheirLaneOnlyWhileWorkersReadIt: until a worker
// says it reads both lanes, and again once none has said so for lanesTTL,
// a background job goes to the first lane, which workers of every release
// read; KeepAlive renews the word.
func TestBackgroundJobsUseTheirLaneOnlyWhileWorkersReadIt(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	q := New(rdb, redistest.Prefix(t))
	q.lanesEvery = 0
	t.Cleanup(func() { rdb.Del(ctx, q.key, q.bgKey, q.lanesKey(), q.aliveKey("w")) })
	if err := q.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	depths := func(step string, want Depths) {
		t.Helper()
		if d, err := q.Depths(ctx); err != nil || d != want {
			t.Fatalf("%s: depths %+v, %v; want %+v", step, d, err, want)
		}
	}
	enqueue(t, q, bgJob("before"))
	depths("before any worker read both lanes", Depths{Interactive: 1})
	if err := q.ReadBothLanes(ctx); err != nil {
		t.Fatal(err)
	}
	if ttl, err := rdb.PTTL(ctx, q.lanesKey()).Result(); err != nil || ttl <= 0 || ttl > lanesTTL {
		t.Fatalf("the word lasts %v, %v; want at most %v", ttl, err, lanesTTL)
	}
	enqueue(t, q, bgJob("while"))
	depths("while workers read both", Depths{Interactive: 1, Background: 1})
	if err := rdb.Del(ctx, q.lanesKey()).Err(); err != nil {
		t.Fatal(err)
	}
	enqueue(t, q, bgJob("after"))
	depths("once the word lapsed", Depths{Interactive: 2, Background: 1})
	if err := q.KeepAlive(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	enqueue(t, q, bgJob("renewed"))
	depths("once a worker renewed its lease", Depths{Interactive: 2, Background: 2})
	// The job keeps its wish: a worker tells its lane by where it came from.
	d, err := q.Next(ctx, "w", 10*time.Millisecond)
	if err != nil || d == nil || d.Job.GameID != "before" || !d.Job.Background || d.Background() {
		t.Fatalf("first job %+v, %v; want the one queued before, from the first lane", d, err)
	}
}

// TestAPlayersJobAbandonedPastOneScanWasTakenAfterABackgroundJob: a
// worker takes a background job only when no player's job waits,
// abandoned or new (docs/ai.md). With more players' jobs in progress than
// one look scans (a busy pool of some 200 workers), one abandoned past
// the look's reach lost to a new background job.
func TestAPlayersJobAbandonedPastOneScanWasTakenAfterABackgroundJob(t *testing.T) {
	ctx := context.Background()
	q, rdb := testQueue(t, time.Minute)
	q.Lease = 0 // no leases: only the claim timeout hands jobs over
	const busy = 200
	for i := range busy + 1 {
		enqueue(t, q, playerJob(fmt.Sprintf("p%d", i)))
	}
	// Workers of a busy pool hold every player's job.
	got, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: q.group, Consumer: "busy", Streams: []string{q.key, ">"}, Count: busy + 1}).Result()
	if err != nil || len(got[0].Messages) != busy+1 {
		t.Fatalf("read %v %v", got, err)
	}
	// The last one's worker hung long ago: its job is idle past the claim timeout.
	last := got[0].Messages[busy].ID
	if err := rdb.XClaim(ctx, &redis.XClaimArgs{Stream: q.key, Group: q.group, Consumer: "hung", Messages: []string{last}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(ctx, "XCLAIM", q.key, q.group, "hung", 0, last, "IDLE", (2 * time.Minute).Milliseconds(), "JUSTID").Err(); err != nil {
		t.Fatal(err)
	}
	enqueue(t, q, bgJob("bg"))
	// The worker looks as Worker.Run does, again and again: the first job
	// it gets must be the player's.
	var d *Delivery
	for i := 0; i < 5 && d == nil; i++ {
		var err error
		if d, err = q.Next(ctx, "w", 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if d == nil {
		t.Fatal("no job in 5 looks")
	}
	if d.Background() {
		t.Fatalf("took background job %s while the player's job %s (game p%d), abandoned for 2 min, waits", d.Job.GameID, last, busy)
	}
}
