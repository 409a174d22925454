package ai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/palacehq/palace/pkg/aijobs"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/logging"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/services/ai/internal/worker"
	"github.com/palacehq/palace/services/game"
)

// jobsKey is the queue's stream under prefix, as docs/ai.md names it.
func jobsKey(prefix string) string { return prefix + "{ai}:jobs" }

// groupConsumers lists the workers' consumer group by name.
func groupConsumers(t *testing.T, rdb redis.UniversalClient, prefix string) map[string]redis.XInfoConsumer {
	t.Helper()
	cs, err := rdb.XInfoConsumers(context.Background(), jobsKey(prefix), "workers").Result()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]redis.XInfoConsumer{}
	for _, c := range cs {
		byName[c.Name] = c
	}
	return byName
}

// TestStoppedWorkersLeaveTheGroup: a worker process that stops cleanly
// must not leave its consumers listed in the group, or every restart adds
// some for good.
func TestStoppedWorkersLeaveTheGroup(t *testing.T) {
	rdb := redistest.Client(t)
	var prefix string
	// Registered before the services start, so it runs once they stopped.
	t.Cleanup(func() {
		if cs := groupConsumers(t, rdb, prefix); len(cs) != 0 {
			t.Errorf("consumers %+v after the workers stopped; want none", cs)
		}
	})
	g, p := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 2)
	prefix = p
	g.play(t, 1)
	g.play(t, 3)
	if cs := groupConsumers(t, rdb, prefix); len(cs) == 0 {
		t.Fatal("no consumer listed while the workers run")
	}
}

// blockingMover thinks until its context ends, after telling started.
type blockingMover struct{ started chan struct{} }

func (m blockingMover) Move(ctx context.Context, _ rules.Variant, _ string, _ []rules.Move, _ int, _ uint64, _ time.Duration) (rules.Move, uint64, error) {
	close(m.started)
	<-ctx.Done()
	return rules.NoMove, 0, ctx.Err()
}

// TestAWorkerStoppedMidJobStaysInTheGroup: leaving would drop the pending
// entry of the job it holds, and no worker would ever take it over. The
// job is handed back: the next worker takes it at once, not after the
// claim timeout.
func TestAWorkerStoppedMidJobStaysInTheGroup(t *testing.T) {
	g, prefix := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 0)
	rdb := redistest.Client(t)
	q := aijobs.New(rdb, prefix)
	mover := blockingMover{started: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker.Worker{Name: "stopped", Log: logging.Discard(), Queue: q, Games: g.games, Mover: mover}
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-mover.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not take the job")
	}
	cancel()
	<-done
	if c, ok := groupConsumers(t, rdb, prefix)["stopped"]; !ok || c.Pending != 1 {
		t.Fatalf("consumer %+v (listed: %v); want it kept with its job pending", c, ok)
	}
	// The claim timeout, 30 s by default, has not passed.
	if d, err := q.Next(context.Background(), "next", 10*time.Millisecond); err != nil || d == nil || d.Job.GameID != g.id || d.Attempt != 2 {
		t.Fatalf("job taken over: %+v, %v; want the stopped worker's, at its second attempt", d, err)
	}
}

// TestASearchingWorkerKeepsItsJob: a worker renews its lease while it
// thinks, so that a long search is not taken over by another worker as
// if its worker had died, and searched twice.
func TestASearchingWorkerKeepsItsJob(t *testing.T) {
	g, prefix := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 0)
	q := aijobs.New(redistest.Client(t), prefix)
	// Long enough that a machine busy with other tests still renews it in
	// time; short enough to lapse within the watch below were it not.
	q.Lease = time.Second
	mover := blockingMover{started: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker.Worker{Name: "searching", Log: logging.Discard(), Queue: q, Games: g.games, Mover: mover}
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-mover.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not take the job")
	}
	for end := time.Now().Add(3 * q.Lease); time.Now().Before(end); time.Sleep(q.Lease / 4) {
		if d, err := q.Next(context.Background(), "other", 10*time.Millisecond); err != nil || d != nil {
			t.Fatalf("the job of a worker still searching was taken over: %+v %v", d, err)
		}
	}
}

// TestAWorkerMeasuresItsJobs: a worker counts the moves it computes and
// the nodes searched, and records, in seconds, how long each job waited
// and how long each move took: the metrics the pool is scaled on.
func TestAWorkerMeasuresItsJobs(t *testing.T) {
	g, prefix := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 0)
	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("t")
	var m worker.Metrics
	var err error
	if m.Wait, err = meter.Float64Histogram("wait"); err != nil {
		t.Fatal(err)
	}
	if m.Think, err = meter.Float64Histogram("think"); err != nil {
		t.Fatal(err)
	}
	if m.Jobs, err = meter.Int64Counter("jobs"); err != nil {
		t.Fatal(err)
	}
	if m.Nodes, err = meter.Int64Counter("nodes"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	const queued = 100 * time.Millisecond
	time.Sleep(queued) // the job waits at least this long
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker.Worker{Name: "measured", Log: logging.Discard(), Queue: aijobs.New(redistest.Client(t), prefix), Games: g.games, Mover: worker.NewBuiltin(1), Metrics: &m}
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	g.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == 2 })
	cancel()
	<-done
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]float64{}
	counts := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					sums[mt.Name] += float64(dp.Value)
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					sums[mt.Name] += dp.Sum
					counts[mt.Name] += dp.Count
				}
			}
		}
	}
	if sums["jobs"] != 1 || sums["nodes"] < 1 {
		t.Errorf("jobs %v, nodes %v; want one move and the nodes searched for it", sums["jobs"], sums["nodes"])
	}
	if counts["wait"] != 1 || sums["wait"] < queued.Seconds() || sums["wait"] > 10 {
		t.Errorf("job wait: %d recorded, %v s in all; want one, of at least %v", counts["wait"], sums["wait"], queued)
	}
	if counts["think"] != 1 || sums["think"] <= 0 || sums["think"] > 10 {
		t.Errorf("think: %d recorded, %v s in all; want one, in seconds", counts["think"], sums["think"])
	}
}

// TestWorkersPruneIdleConsumers: consumers of workers that were killed
// (no clean stop, so no leaving) are deleted once idle, unless they hold
// a job.
func TestWorkersPruneIdleConsumers(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() { rdb.Del(ctx, jobsKey(prefix)) })
	q := aijobs.New(rdb, prefix)
	if err := q.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, aijobs.Job{GameID: "g1", Version: 1, Kind: aijobs.KindMove, Side: "second", Level: 1}); err != nil {
		t.Fatal(err)
	}
	if d, err := q.Next(ctx, "killed-holding", time.Second); err != nil || d == nil {
		t.Fatalf("job %+v, %v", d, err)
	}
	if err := rdb.XGroupCreateConsumer(ctx, jobsKey(prefix), "workers", "killed").Err(); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		worker.PruneConsumers(pctx, logging.Discard(), q, 50*time.Millisecond, 300*time.Millisecond)
	}()
	t.Cleanup(func() { cancel(); <-done })
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if _, ok := groupConsumers(t, rdb, prefix)["killed"]; !ok {
			break
		}
	}
	cs := groupConsumers(t, rdb, prefix)
	if _, ok := cs["killed"]; ok || len(cs) != 1 || cs["killed-holding"].Pending != 1 {
		t.Fatalf("consumers %+v; want only killed-holding, with its job", cs)
	}
}

// TestTheGameServiceTrimsVoidJobs: with no worker deployed, jobs older
// than a seat credential's lifetime (--seat-ttl) are void and must not
// stay in the queue for ever.
func TestTheGameServiceTrimsVoidJobs(t *testing.T) {
	gcfg := game.DefaultConfig()
	gcfg.SeatTTL = time.Hour
	g, prefix := startAIGameWith(t, gcfg, commonv1.GameKind_GAME_KIND_XIANGQI, 0)
	ctx := context.Background()
	rdb := redistest.Client(t)
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	const void = 250
	for i := range void {
		b, err := json.Marshal(aijobs.Job{GameID: fmt.Sprint("old", i), Version: 1, Kind: aijobs.KindMove, Side: "second", Level: 1, EnqueuedMs: old})
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: jobsKey(prefix), ID: fmt.Sprintf("%d-%d", old, i), Values: []any{"j", b}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	msgs, err := rdb.XRange(ctx, jobsKey(prefix), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	// Trimming drops whole nodes of the stream (at most 100 entries each),
	// so a few void jobs may stay.
	if len(msgs) > 100 {
		t.Fatalf("%d jobs queued after the AI's turn came, of %d void ones and one new; want the void ones trimmed", len(msgs), void)
	}
	var j aijobs.Job
	if err := json.Unmarshal([]byte(msgs[len(msgs)-1].Values["j"].(string)), &j); err != nil || j.GameID != g.id {
		t.Fatalf("last job %+v, %v; want the game's", j, err)
	}
}

// TestARestartedWorkerTakesNewNames: a container restarted in place keeps
// its host name and pid. Its workers must not take the consumer names of
// the killed ones: a job the killed worker held would look held by a live
// worker, and wait for --ai-claim-after.
func TestARestartedWorkerTakesNewNames(t *testing.T) {
	rdb := redistest.Client(t)
	var runs [2]map[string]bool
	for i := range runs {
		t.Run(fmt.Sprint("start ", i), func(t *testing.T) {
			g, prefix := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 1)
			g.play(t, 1) // the worker takes the AI's job
			for deadline := time.Now().Add(5 * time.Second); len(groupConsumers(t, rdb, prefix)) == 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("no consumer 5 s after the worker started")
				}
			}
			runs[i] = map[string]bool{}
			for name := range groupConsumers(t, rdb, prefix) {
				runs[i][name] = true
			}
		})
	}
	for name := range runs[1] {
		if runs[0][name] {
			t.Fatalf("consumer %q in both starts of one process", name)
		}
	}
}
