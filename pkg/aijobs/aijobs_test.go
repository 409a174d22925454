package aijobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/redisx"
)

// TestEnsureReportsWhatIsNotAnExistingGroup: a group that exists is
// fine, any other refusal (the key holds something else) is an error.
func TestEnsureReportsWhatIsNotAnExistingGroup(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	q := New(rdb, redistest.Prefix(t))
	t.Cleanup(func() { rdb.Del(ctx, q.key) })
	if err := rdb.Set(ctx, q.key, "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := q.Ensure(ctx); err == nil {
		t.Fatal("Ensure on a key that is not a stream succeeded")
	}
}

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

// testQueue is a fresh queue whose jobs are claimed after claimAfter.
func testQueue(t *testing.T, claimAfter time.Duration) (*Queue, redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	rdb := redistest.Client(t)
	q := New(rdb, redistest.Prefix(t))
	q.ClaimAfter = claimAfter
	t.Cleanup(func() { rdb.Del(ctx, q.key, q.bgKey, q.dead, q.lanesKey()) })
	if err := q.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.ReadBothLanes(ctx); err != nil {
		t.Fatal(err)
	}
	return q, rdb
}

func addPoison(t *testing.T, rdb redis.UniversalClient, q *Queue, n int) {
	t.Helper()
	for range n {
		if err := rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: q.key, Values: map[string]any{"j": "{not json"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// nextWithin calls Next for consumer until it hands out a job or d ends,
// going on after errors as a worker does.
func nextWithin(t *testing.T, q *Queue, consumer string, d time.Duration) *Delivery {
	t.Helper()
	errs := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		got, err := q.Next(context.Background(), consumer, 50*time.Millisecond)
		if err != nil {
			if errs++; errs <= 3 {
				t.Logf("%s: %v", consumer, err)
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if got != nil {
			return got
		}
	}
	return nil
}

// TestPoisonJobsDoNotStopTheHandover: jobs that cannot be read, ahead of
// a good one abandoned by a dead worker, must not keep it from the next
// worker, however many there are and whoever read them first.
func TestPoisonJobsDoNotStopTheHandover(t *testing.T) {
	for _, tc := range []struct {
		name string
		// take reads every job as the worker that dies.
		take func(t *testing.T, q *Queue, rdb redis.UniversalClient)
	}{
		{name: "taken by Next", take: func(t *testing.T, q *Queue, _ redis.UniversalClient) {
			for range 11 {
				if _, err := q.Next(context.Background(), "w1", 10*time.Millisecond); err != nil {
					t.Logf("w1: %v", err)
				}
			}
		}},
		{name: "taken raw", take: func(t *testing.T, q *Queue, rdb redis.UniversalClient) {
			// As a worker that does not vet jobs would (an older release).
			err := rdb.XReadGroup(context.Background(), &redis.XReadGroupArgs{Group: q.group, Consumer: "w1", Streams: []string{q.key, ">"}, Count: 100, Block: -1}).Err()
			if err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			q, rdb := testQueue(t, 100*time.Millisecond)
			addPoison(t, rdb, q, 10)
			if err := q.Enqueue(ctx, Job{GameID: "good", Version: 3, Kind: KindMove, Side: "second", Level: 1}); err != nil {
				t.Fatal(err)
			}
			tc.take(t, q, rdb)
			// w1 dies holding what it took.
			d := nextWithin(t, q, "w2", 3*time.Second)
			if d == nil || d.Job.GameID != "good" {
				t.Fatalf("w2 got %+v in 3s; want the good job handed over", d)
			}
			if err := q.Done(ctx, d); err != nil {
				t.Fatal(err)
			}
			// The scan may have reached the good job first; the poison goes
			// on the following ones.
			if d := nextWithin(t, q, "w2", 300*time.Millisecond); d != nil {
				t.Fatalf("w2 got %+v after the good job; want nothing", d)
			}
			if n, _ := q.Depth(ctx); n != 0 {
				t.Fatalf("depth %d, want 0: the poison is still queued", n)
			}
			if n, _ := q.Dead(ctx); n != 10 {
				t.Fatalf("%d dead-lettered, want the 10 poison jobs", n)
			}
		})
	}
}

// TestAPoisonJobIsDeadLetteredAtItsFirstRead: a job that cannot be read
// is moved to the dead-letter stream, with its id and why, and never
// handed out.
func TestAPoisonJobIsDeadLetteredAtItsFirstRead(t *testing.T) {
	ctx := context.Background()
	q, rdb := testQueue(t, 50*time.Millisecond)
	addPoison(t, rdb, q, 1)
	if d, err := q.Next(ctx, "w1", 10*time.Millisecond); err != nil || d != nil {
		t.Fatalf("poison read: %+v, %v; want nil, nil", d, err)
	}
	if n, _ := q.Depth(ctx); n != 0 {
		t.Fatalf("depth %d after one read, want 0", n)
	}
	if p, err := rdb.XPending(ctx, q.key, q.group).Result(); err != nil || p.Count != 0 {
		t.Fatalf("pending %+v, %v; want none", p, err)
	}
	dead, err := rdb.XRange(ctx, q.dead, "-", "+").Result()
	if err != nil || len(dead) != 1 || dead[0].Values["j"] != "{not json" || dead[0].Values["id"] == "" || dead[0].Values["reason"] == "" {
		t.Fatalf("dead letters %+v, %v; want the poison job with its id and reason", dead, err)
	}
	time.Sleep(80 * time.Millisecond)
	if d, err := q.Next(ctx, "w2", 10*time.Millisecond); err != nil || d != nil {
		t.Fatalf("poison came back: %+v, %v", d, err)
	}
}

// TestAJobOfAnUnknownSideIsDeadLetteredAtItsFirstRead: no worker could
// play it, so it is not handed out again and again.
func TestAJobOfAnUnknownSideIsDeadLetteredAtItsFirstRead(t *testing.T) {
	ctx := context.Background()
	q, rdb := testQueue(t, 50*time.Millisecond)
	if err := q.Enqueue(ctx, Job{GameID: "g1", Version: 1, Kind: KindMove, Side: "third", Level: 1}); err != nil {
		t.Fatal(err)
	}
	if d, err := q.Next(ctx, "w1", 10*time.Millisecond); err != nil || d != nil {
		t.Fatalf("read: %+v, %v; want nil, nil", d, err)
	}
	dead, err := rdb.XRange(ctx, q.dead, "-", "+").Result()
	if err != nil || len(dead) != 1 || !strings.Contains(fmt.Sprint(dead[0].Values["reason"]), `unknown side "third"`) {
		t.Fatalf("dead letters %+v, %v; want the job, for its side", dead, err)
	}
}

// TestAJobIsDeadLetteredAfterMaxAttempts: a job no worker finishes (one
// that crashes every engine, say) is handed out MaxAttempts times, then
// dead-lettered instead of going round for ever.
func TestAJobIsDeadLetteredAfterMaxAttempts(t *testing.T) {
	ctx := context.Background()
	q, _ := testQueue(t, 50*time.Millisecond)
	q.MaxAttempts = 3
	if err := q.Enqueue(ctx, Job{GameID: "crashy", Version: 3, Kind: KindMove, Side: "second", Level: 1}); err != nil {
		t.Fatal(err)
	}
	var id string
	for attempt := int64(1); attempt <= 3; attempt++ {
		d := nextWithin(t, q, fmt.Sprintf("w%d", attempt), time.Second)
		if d == nil || d.Job.GameID != "crashy" || d.Attempt != attempt || (id != "" && d.ID != id) {
			t.Fatalf("delivery %d: %+v", attempt, d)
		}
		id = d.ID // and the worker dies
	}
	if d := nextWithin(t, q, "w4", 300*time.Millisecond); d != nil {
		t.Fatalf("a 4th delivery: %+v; want the job dead-lettered after 3", d)
	}
	if n, _ := q.Depth(ctx); n != 0 {
		t.Fatalf("depth %d, want 0", n)
	}
	if n, _ := q.Dead(ctx); n != 1 {
		t.Fatalf("%d dead-lettered, want 1", n)
	}
}

// TestTheClaimScansPastJobsInProgress: Redis looks at only ten pending
// entries per claim here; a job abandoned behind more jobs that live
// workers still hold must be found all the same.
func TestTheClaimScansPastJobsInProgress(t *testing.T) {
	ctx := context.Background()
	q, rdb := testQueue(t, 500*time.Millisecond)
	for i := range 13 {
		if err := q.Enqueue(ctx, Job{GameID: fmt.Sprint("g", i), Version: 3, Kind: KindMove, Side: "second", Level: 1}); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: q.group, Consumer: "w1", Streams: []string{q.key, ">"}, Count: 100, Block: -1}).Result()
	if err != nil || len(msgs[0].Messages) != 13 {
		t.Fatalf("read %v, %v", msgs, err)
	}
	time.Sleep(600 * time.Millisecond)
	// All idle; the first 12 are taken back by a live worker, the last
	// is abandoned.
	var busy []string
	for _, m := range msgs[0].Messages[:12] {
		busy = append(busy, m.ID)
	}
	if err := rdb.XClaim(ctx, &redis.XClaimArgs{Stream: q.key, Group: q.group, Consumer: "busy", Messages: busy}).Err(); err != nil {
		t.Fatal(err)
	}
	d, err := q.Next(ctx, "w2", 10*time.Millisecond)
	if err != nil || d == nil || d.Job.GameID != "g12" || d.Attempt != 2 {
		t.Fatalf("w2 got %+v, %v; want the abandoned g12, second delivery", d, err)
	}
}

// TestWorkersShareOneQueue: the workers of a process share one Queue (and
// its scan cursor); each job still goes to one of them.
func TestWorkersShareOneQueue(t *testing.T) {
	ctx := context.Background()
	q, _ := testQueue(t, time.Minute)
	const jobs = 40
	for i := range jobs {
		if err := q.Enqueue(ctx, Job{GameID: fmt.Sprint("g", i), Version: 3, Kind: KindMove, Side: "second", Level: 1}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for {
				d, err := q.Next(ctx, fmt.Sprint("w", w), 50*time.Millisecond)
				if err != nil {
					t.Errorf("w%d: %v", w, err)
					return
				}
				if d == nil {
					return
				}
				mu.Lock()
				seen[d.Job.GameID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != jobs {
		t.Fatalf("%d jobs handed out, want %d", len(seen), jobs)
	}
	for g, n := range seen {
		if n != 1 {
			t.Errorf("%s handed out %d times", g, n)
		}
	}
}

// addJobsAt adds n jobs queued at ms (unix milliseconds), as Enqueue did
// then, and returns their ids.
func addJobsAt(t *testing.T, rdb redis.UniversalClient, q *Queue, ms int64, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		b, err := json.Marshal(Job{GameID: fmt.Sprint("g", ms, "-", i), Version: 3, Kind: KindMove, Side: "second", Level: 1, EnqueuedMs: ms})
		if err != nil {
			t.Fatal(err)
		}
		id, err := rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: q.key, ID: fmt.Sprintf("%d-%d", ms, i), Values: []any{"j", b}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// streamIDs is the ids in the queue's stream.
func streamIDs(t *testing.T, rdb redis.UniversalClient, q *Queue) map[string]bool {
	t.Helper()
	msgs, err := rdb.XRange(context.Background(), q.key, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, m := range msgs {
		ids[m.ID] = true
	}
	return ids
}

// nodeEntries is Redis' default stream-node-max-entries: trimming with
// "~" drops whole nodes only, so up to one node's worth of void jobs
// (less one) may stay, in the node that also holds live ones.
const nodeEntries = 100

// TestEnqueueTrimsVoidJobs: with no worker to take them, jobs older than
// their credential's lifetime must not pile up in the stream for ever;
// younger ones must stay.
func TestEnqueueTrimsVoidJobs(t *testing.T) {
	ctx := context.Background()
	q, rdb := testQueue(t, time.Minute)
	q.MaxAge = time.Hour
	now := time.Now()
	void := addJobsAt(t, rdb, q, now.Add(-2*time.Hour).UnixMilli(), 250)
	live := addJobsAt(t, rdb, q, now.Add(-50*time.Minute).UnixMilli(), 5)
	if err := q.Enqueue(ctx, Job{GameID: "new", Version: 3, Kind: KindMove, Side: "second", Level: 1, EnqueuedMs: now.UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	ids := streamIDs(t, rdb, q)
	kept := 0
	for _, id := range void {
		if ids[id] {
			kept++
		}
	}
	if kept >= nodeEntries {
		t.Fatalf("%d of %d void jobs still queued after an enqueue, want fewer than %d", kept, len(void), nodeEntries)
	}
	for _, id := range live {
		if !ids[id] {
			t.Fatalf("job %s, younger than MaxAge, was trimmed", id)
		}
	}
	if len(ids) != kept+len(live)+1 {
		t.Fatalf("%d jobs queued, want %d void, %d live and the new one", len(ids), kept, len(live))
	}
}

// TestATrimmedPendingJobDoesNotStopTheClaim: jobs a dead worker held are
// trimmed as void while pending; the next worker must go on to the jobs
// still queued, never get a trimmed one, and their pending entries must
// go.
func TestATrimmedPendingJobDoesNotStopTheClaim(t *testing.T) {
	ctx := context.Background()
	q, rdb := testQueue(t, 100*time.Millisecond)
	q.MaxAge = time.Hour
	void := addJobsAt(t, rdb, q, time.Now().Add(-2*time.Hour).UnixMilli(), 250)
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: q.group, Consumer: "dead", Streams: []string{q.key, ">"}, Count: 1000, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, Job{GameID: "new", Version: 3, Kind: KindMove, Side: "second", Level: 1, EnqueuedMs: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	ids := streamIDs(t, rdb, q)
	trimmed := map[string]bool{}
	for _, id := range void {
		if !ids[id] {
			trimmed[id] = true
		}
	}
	if len(trimmed) == 0 {
		t.Fatal("no pending void job was trimmed")
	}
	time.Sleep(150 * time.Millisecond)
	handed := 0
	gotNew := false
	for range 2 * len(void) {
		d, err := q.Next(ctx, "w2", 20*time.Millisecond)
		if err != nil {
			t.Fatalf("after %d jobs: %v", handed, err)
		}
		if d == nil {
			if gotNew && handed == len(void)-len(trimmed) {
				break
			}
			continue
		}
		if trimmed[d.ID] {
			t.Fatalf("trimmed job %s handed out", d.ID)
		}
		if d.Job.GameID == "new" {
			gotNew = true
		} else {
			handed++
		}
		if err := q.Done(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if !gotNew || handed != len(void)-len(trimmed) {
		t.Fatalf("handed out the new job: %v, and %d void jobs kept; want it and all %d", gotNew, handed, len(void)-len(trimmed))
	}
	if p, err := rdb.XPending(ctx, q.key, q.group).Result(); err != nil || p.Count != 0 {
		t.Fatalf("pending %+v, %v; want none: the trimmed jobs' entries stay", p, err)
	}
}

// consumers lists the group's consumers by name.
func consumers(t *testing.T, rdb redis.UniversalClient, q *Queue) map[string]redis.XInfoConsumer {
	t.Helper()
	cs, err := rdb.XInfoConsumers(context.Background(), q.key, q.group).Result()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]redis.XInfoConsumer{}
	for _, c := range cs {
		byName[c.Name] = c
	}
	return byName
}

// TestLeaveKeepsAConsumerHoldingAJob: a consumer that leaves is no
// longer listed, unless it holds a job, whose pending entry another
// worker needs to claim it.
func TestLeaveKeepsAConsumerHoldingAJob(t *testing.T) {
	ctx := context.Background()
	q, rdb := testQueue(t, time.Minute)
	if err := q.Enqueue(ctx, Job{GameID: "g1", Version: 3, Kind: KindMove, Side: "second", Level: 1}); err != nil {
		t.Fatal(err)
	}
	d, err := q.Next(ctx, "holding", 100*time.Millisecond)
	if err != nil || d == nil {
		t.Fatalf("job %+v, %v", d, err)
	}
	if err := rdb.XGroupCreateConsumer(ctx, q.key, q.group, "idle").Err(); err != nil {
		t.Fatal(err)
	}
	if left, err := q.Leave(ctx, "holding"); err != nil || left {
		t.Fatalf("Leave(holding) = %v, %v; want false: it holds a job", left, err)
	}
	if left, err := q.Leave(ctx, "idle"); err != nil || !left {
		t.Fatalf("Leave(idle) = %v, %v; want true", left, err)
	}
	if cs := consumers(t, rdb, q); len(cs) != 1 || cs["holding"].Pending != 1 {
		t.Fatalf("consumers %+v; want holding alone, with its job", cs)
	}
	if err := q.Done(ctx, d); err != nil {
		t.Fatal(err)
	}
	if left, err := q.Leave(ctx, "holding"); err != nil || !left {
		t.Fatalf("Leave(holding) once done = %v, %v; want true", left, err)
	}
	if cs := consumers(t, rdb, q); len(cs) != 0 {
		t.Fatalf("consumers %+v; want none", cs)
	}
}

// TestPruneDeletesIdleConsumersHoldingNoJob: consumers of workers gone
// without leaving are deleted once idle long enough, unless they hold a
// job; live ones stay.
func TestPruneDeletesIdleConsumersHoldingNoJob(t *testing.T) {
	ctx := context.Background()
	q, rdb := testQueue(t, time.Minute)
	for _, g := range []string{"g1", "g2"} {
		if err := q.Enqueue(ctx, Job{GameID: g, Version: 3, Kind: KindMove, Side: "second", Level: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := q.Next(ctx, "holding", 100*time.Millisecond); err != nil || d == nil {
		t.Fatalf("job %+v, %v", d, err)
	}
	// A worker that finished its jobs and was killed.
	if err := rdb.XGroupCreateConsumer(ctx, q.key, q.group, "gone").Err(); err != nil {
		t.Fatal(err)
	}
	// Margins wide enough for a loaded machine: "live" must reach Prune
	// well within its idle threshold.
	time.Sleep(1500 * time.Millisecond)
	d, err := q.Next(ctx, "live", 100*time.Millisecond)
	if err != nil || d == nil {
		t.Fatalf("job %+v, %v", d, err)
	}
	if err := q.Done(ctx, d); err != nil {
		t.Fatal(err)
	}
	n, err := q.Prune(ctx, time.Second)
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want 1", n, err)
	}
	cs := consumers(t, rdb, q)
	if _, ok := cs["gone"]; ok || len(cs) != 2 || cs["holding"].Pending != 1 {
		t.Fatalf("consumers %+v; want holding, with its job, and live", cs)
	}
}

// TestQueueMakesItsLostGroupAgain: a Redis that restarts without its data
// (or a deleted key) takes the stream and its group away; the jobs queued
// after that must still reach the workers, without restarting them.
func TestQueueMakesItsLostGroupAgain(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	q := New(rdb, redistest.Prefix(t))
	t.Cleanup(func() { rdb.Del(ctx, q.key) })
	if err := q.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, Job{GameID: "before", Version: 1, Kind: KindMove, Side: "second", Level: 1}); err != nil {
		t.Fatal(err)
	}
	if d, err := q.Next(ctx, "w1", 10*time.Millisecond); err != nil || d == nil || d.Job.GameID != "before" {
		t.Fatalf("first delivery %+v %v", d, err)
	}

	// Lost with nothing queued since: no job, no error, and the group is back.
	if err := rdb.Del(ctx, q.key).Err(); err != nil {
		t.Fatal(err)
	}
	if d, err := q.Next(ctx, "w1", 10*time.Millisecond); err != nil || d != nil {
		t.Fatalf("after the stream was lost: %+v %v; want nothing and no error", d, err)
	}
	if err := rdb.XInfoGroups(ctx, q.key).Err(); err != nil {
		t.Fatalf("the group was not made again: %v", err)
	}

	// Lost, then a job queued (its XADD makes the stream without the group).
	if err := rdb.Del(ctx, q.key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, Job{GameID: "after", Version: 3, Kind: KindMove, Side: "second", Level: 1}); err != nil {
		t.Fatal(err)
	}
	d, err := q.Next(ctx, "w2", 10*time.Millisecond)
	if err != nil || d == nil || d.Job.GameID != "after" || d.Attempt != 1 {
		t.Fatalf("the job queued after the loss: %+v %v", d, err)
	}
	if err := q.Done(ctx, d); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Depth(ctx); err != nil || n != 0 {
		t.Fatalf("depth %d (%v) after done, want 0", n, err)
	}
}

// TestAHandedBackJobIsTakenOverAtOnce: a job its worker hands back (the
// worker is stopping) goes to the next worker without waiting for the
// claim timeout; one that another worker took over meanwhile stays with
// it.
func TestAHandedBackJobIsTakenOverAtOnce(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	q := New(rdb, redistest.Prefix(t))
	q.ClaimAfter = time.Minute
	t.Cleanup(func() { rdb.Del(ctx, q.key) })
	if err := q.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, Job{GameID: "g", Version: 1, Kind: KindMove, Side: "second", Level: 1}); err != nil {
		t.Fatal(err)
	}
	first, err := q.Next(ctx, "w1", 10*time.Millisecond)
	if err != nil || first == nil {
		t.Fatalf("first delivery %+v %v", first, err)
	}
	if d, err := q.Next(ctx, "w2", 10*time.Millisecond); err != nil || d != nil {
		t.Fatalf("taken over before it was handed back: %+v %v", d, err)
	}
	if err := q.HandBack(ctx, "w1", first); err != nil {
		t.Fatal(err)
	}
	again, err := q.Next(ctx, "w2", 10*time.Millisecond)
	if err != nil || again == nil || again.ID != first.ID || again.Attempt != 2 {
		t.Fatalf("after the hand back: %+v %v; want the job, at its second attempt", again, err)
	}
	// w1 hands it back again, late: it is w2's now, and stays so.
	if err := q.HandBack(ctx, "w1", first); err != nil {
		t.Fatal(err)
	}
	if d, err := q.Next(ctx, "w3", 10*time.Millisecond); err != nil || d != nil {
		t.Fatalf("a job handed back by a worker that no longer held it was taken again: %+v %v", d, err)
	}
}

// TestAPostponedJobKeepsTheCountOfItsEarlierTries: a postponed delivery
// does not count, but the tries before it do; a postponement reset them
// all, so that a job tried and handed back, then postponed by the worker
// that took it over, came back at its first attempt, and one that crashes
// every engine got more deliveries than MaxAttempts.
func TestAPostponedJobKeepsTheCountOfItsEarlierTries(t *testing.T) {
	ctx := context.Background()
	q, _ := testQueue(t, time.Minute)
	if err := q.Enqueue(ctx, Job{GameID: "g", Version: 1, Kind: KindMove, Side: "second", Level: 1}); err != nil {
		t.Fatal(err)
	}
	first, err := q.Next(ctx, "w1", 10*time.Millisecond)
	if err != nil || first == nil {
		t.Fatalf("first delivery %+v %v", first, err)
	}
	if err := q.HandBack(ctx, "w1", first); err != nil {
		t.Fatal(err)
	}
	second, err := q.Next(ctx, "w2", 10*time.Millisecond)
	if err != nil || second == nil || second.Attempt != 2 {
		t.Fatalf("after the hand back: %+v %v; want the job at its second attempt", second, err)
	}
	if err := q.Postpone(ctx, "w2", second, 0); err != nil {
		t.Fatal(err)
	}
	third, err := q.Next(ctx, "w3", 10*time.Millisecond)
	if err != nil || third == nil || third.Attempt != 2 {
		t.Fatalf("after the postponement: %+v %v; want the job at its second attempt again, the first still counted", third, err)
	}
	if err := q.Postpone(ctx, "w3", third, 0); err != nil {
		t.Fatal(err)
	}
	// The same postponement made again (its answer lost, say) takes off
	// no earlier try.
	if err := q.Postpone(ctx, "w3", third, 0); err != nil {
		t.Fatal(err)
	}
	if fourth, err := q.Next(ctx, "w4", 10*time.Millisecond); err != nil || fourth == nil || fourth.Attempt != 2 {
		t.Fatalf("after a postponement made twice: %+v %v; want the job at its second attempt", fourth, err)
	}
}

// TestAJobOfAWorkerWhoseLeaseLapsedIsTakenOver: a worker killed in the
// middle of a job (no acknowledgement, no hand back, its lease not
// renewed) loses the job to another worker once its lease lapses, long
// before the claim timeout; a worker that renews its lease keeps its job
// until then.
func TestAJobOfAWorkerWhoseLeaseLapsedIsTakenOver(t *testing.T) {
	ctx := context.Background()
	q, rdb := testQueue(t, time.Hour)
	q.Lease = 300 * time.Millisecond
	t.Cleanup(func() { rdb.Del(ctx, q.aliveKey("killed"), q.aliveKey("busy"), q.aliveKey("w")) })
	for _, g := range []string{"g1", "g2"} {
		if err := q.Enqueue(ctx, Job{GameID: g, Version: 1, Kind: KindMove, Side: "second", Level: 1}); err != nil {
			t.Fatal(err)
		}
	}
	held := map[string]*Delivery{}
	for _, w := range []string{"killed", "busy"} {
		if err := q.KeepAlive(ctx, w); err != nil {
			t.Fatal(err)
		}
		d, err := q.Next(ctx, w, 10*time.Millisecond)
		if err != nil || d == nil {
			t.Fatalf("%s's delivery %+v %v", w, d, err)
		}
		held[w] = d
	}
	// "busy" renews its lease while it searches; "killed" is gone.
	busy, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for busy.Err() == nil {
			_ = q.KeepAlive(busy, "busy")
			time.Sleep(50 * time.Millisecond)
		}
	}()
	if d, err := q.Next(ctx, "w", 10*time.Millisecond); err != nil || d != nil {
		t.Fatalf("taken over while both leases were alive: %+v %v", d, err)
	}
	var got *Delivery
	deadline := time.Now().Add(5 * time.Second)
	for got == nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		d, err := q.Next(ctx, "w", 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		got = d
	}
	if got == nil || got.ID != held["killed"].ID || got.Attempt != 2 {
		t.Fatalf("taken over: %+v; want the killed worker's job (%s), at its second attempt", got, held["killed"].ID)
	}
	// The busy worker keeps its job, however often others look.
	for range 5 {
		time.Sleep(100 * time.Millisecond)
		if d, err := q.Next(ctx, "w", 10*time.Millisecond); err != nil || d != nil {
			t.Fatalf("the job of a worker renewing its lease was taken over: %+v %v", d, err)
		}
	}
	// A worker that leaves ends its lease: its job, handed back or not,
	// goes to the others.
	stop()
	time.Sleep(60 * time.Millisecond)
	if _, err := q.Leave(ctx, "busy"); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, q.aliveKey("busy")).Val(); n != 0 {
		t.Fatal("the lease of a worker that left is still there")
	}
	var last *Delivery
	deadline = time.Now().Add(5 * time.Second)
	for last == nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if last, _ = q.Next(ctx, "w", 10*time.Millisecond); last != nil && last.ID != held["busy"].ID {
			t.Fatalf("got %+v, want the job of the worker that left", last)
		}
	}
	if last == nil {
		t.Fatal("the job of a worker that left was not taken over")
	}
}

// TestNoLeaseNoTakeOverBeforeTheTimeout: with leases off (Lease 0) jobs
// go to other workers only after ClaimAfter, and no lease is kept.
func TestNoLeaseNoTakeOverBeforeTheTimeout(t *testing.T) {
	ctx := context.Background()
	q, rdb := testQueue(t, time.Hour)
	q.Lease = 0
	if err := q.KeepAlive(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, q.aliveKey("w1")).Val(); n != 0 {
		t.Fatal("a lease was kept with leases off: it would never lapse")
	}
	if err := q.Enqueue(ctx, Job{GameID: "g", Version: 1, Kind: KindMove, Side: "second", Level: 1}); err != nil {
		t.Fatal(err)
	}
	if d, err := q.Next(ctx, "w1", 10*time.Millisecond); err != nil || d == nil {
		t.Fatalf("delivery %+v %v", d, err)
	}
	time.Sleep(100 * time.Millisecond)
	if d, err := q.Next(ctx, "w2", 10*time.Millisecond); err != nil || d != nil {
		t.Fatalf("taken over before the claim timeout: %+v %v", d, err)
	}
}
