package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/aijobs"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// A worker stopped while it waited for its game service to come back
// kept the job it held: its hand back, made with the stopped context,
// failed, and the job waited for the claim timeout (or the worker's lease
// to lapse) before another worker took it, on the AI's clock.
func TestAWorkerStoppedDuringAnOutageHandsItsJobBack(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	q, prefix := queueNotTakingOver(t, rdb)
	if err := q.Enqueue(ctx, jobOfG()); err != nil {
		t.Fatal(err)
	}
	w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Queue: q, Games: gameFails{code: codes.Unavailable}, Mover: NewBuiltin(1),
		OutageWait: 100 * time.Millisecond}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(wctx) }()
	time.Sleep(1500 * time.Millisecond) // the try, its outage wait, then waiting for the game service
	cancel()
	<-done

	takenByAnother(t, q, rdb, prefix, "the worker stopped while waiting for its game service kept it")
}

// stopAt is a Redis hook that stops the worker (cancels its context) at a
// given command: after it when after is set (a stop that arrives while
// the command is on the wire: go-redis finishes a command in flight, the
// next one fails at once), else just before it (a stop that arrives just
// before the command is sent).
type stopAt struct {
	name  string
	after bool
	when  func(redis.Cmder) bool
	stop  context.CancelFunc
	once  sync.Once
	fired chan struct{}
}

func newStopAt(name string, after bool, when func(redis.Cmder) bool, stop context.CancelFunc) *stopAt {
	return &stopAt{name: name, after: after, when: when, stop: stop, fired: make(chan struct{})}
}

func (s *stopAt) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *stopAt) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		match := cmd.Name() == s.name
		if match && !s.after && (s.when == nil || s.when(cmd)) {
			s.fire()
		}
		err := next(ctx, cmd)
		if match && s.after && err == nil && (s.when == nil || s.when(cmd)) {
			s.fire()
		}
		return err
	}
}

func (s *stopAt) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (s *stopAt) fire() {
	s.once.Do(func() {
		s.stop()
		close(s.fired)
	})
}

// gameFails is a game service that answers every call with code.
type gameFails struct {
	gamev1.GameServiceClient
	code codes.Code
}

func (g gameFails) GetGame(context.Context, *gamev1.GetGameRequest, ...grpc.CallOption) (*gamev1.GetGameResponse, error) {
	return nil, status.Error(g.code, "failing")
}

func (g gameFails) MakeMove(context.Context, *gamev1.MakeMoveRequest, ...grpc.CallOption) (*gamev1.MakeMoveResponse, error) {
	return nil, status.Error(g.code, "failing")
}

// queueNotTakingOver is a queue where nothing is taken over on its own (no
// lease, an hour's claim timeout): a job reaches another worker at once
// only if its worker handed it back.
func queueNotTakingOver(t *testing.T, rdb redis.UniversalClient) (*aijobs.Queue, string) {
	t.Helper()
	prefix := redistest.Prefix(t)
	q := aijobs.New(rdb, prefix)
	q.ClaimAfter, q.Lease = time.Hour, 0
	if err := q.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	return q, prefix
}

func jobOfG() aijobs.Job {
	return aijobs.Job{GameID: "g", Version: 2, Kind: aijobs.KindMove, Side: "first", Level: 1, Token: "t", EnqueuedMs: time.Now().UnixMilli()}
}

// runUntilStopped runs w until the hook stops it, and fails the test if
// Run does not return soon after.
func runUntilStopped(t *testing.T, w *Worker, ctx context.Context, hook *stopAt) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	select {
	case <-hook.fired:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker never reached the command the stop was set at")
	}
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the worker did not stop")
	}
}

// takenByAnother asserts that another worker takes the job of game g at
// once: the stopped worker handed it back.
func takenByAnother(t *testing.T, q *aijobs.Queue, rdb redis.UniversalClient, prefix, why string) {
	t.Helper()
	d, err := q.Next(context.Background(), "w2", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if d == nil || d.Job.GameID != "g" {
		var holders []string
		if p, err := rdb.XPendingExt(context.Background(), &redis.XPendingExtArgs{Stream: prefix + "{ai}:jobs", Group: "workers", Start: "-", End: "+", Count: 10}).Result(); err == nil {
			for _, e := range p {
				holders = append(holders, fmt.Sprintf("%s held by %s, idle %v", e.ID, e.Consumer, e.Idle.Round(time.Millisecond)))
			}
		}
		t.Fatalf("another worker got %+v, want the job of game g: %s; it stays pending with the stopped worker until the claim timeout (or its lease lapses); pending: %v", d, why, holders)
	}
}

// A worker stopped while its Next took over an abandoned job (XAUTOCLAIM
// on the wire) held the job, then failed its next call, with the stopped
// context: Next returned an error, and Run never saw the job it held,
// which waited out the claim timeout (or the lease) again.
func TestAWorkerStoppedAsItTookOverAJobHandsItBack(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	q, prefix := queueNotTakingOver(t, rdb)
	if err := q.Enqueue(ctx, jobOfG()); err != nil {
		t.Fatal(err)
	}
	// A worker that took the job and handed it back as it stopped: the
	// job is there for the next worker to take over at once.
	d, err := q.Next(ctx, "gone", 100*time.Millisecond)
	if err != nil || d == nil {
		t.Fatalf("first read: %v %v", d, err)
	}
	if err := q.HandBack(ctx, "gone", d); err != nil {
		t.Fatal(err)
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hook := newStopAt("xautoclaim", true, func(c redis.Cmder) bool {
		msgs, _ := c.(*redis.XAutoClaimCmd).Val()
		return len(msgs) > 0
	}, cancel)
	rdb.AddHook(hook)
	w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Queue: q, Games: gameFails{code: codes.Unavailable}, Mover: NewBuiltin(1)}
	runUntilStopped(t, w, wctx, hook)

	takenByAnother(t, q, rdb, prefix, "the stopped worker claimed it inside Next and kept it")
}

// A failed try is handed back for a retry, and a job whose commit has
// not shown (NotFound past commitWait) postponed, with the worker's
// context: a stop just then failed the hand back, and the worker stopped
// holding the job.
func TestAWorkerStoppedAsItHandsAJobBackForLaterHandsItBackNow(t *testing.T) {
	for _, tt := range []struct {
		name string
		code codes.Code
	}{{"retried", codes.Internal}, {"postponed", codes.NotFound}} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			rdb := redistest.Client(t)
			q, prefix := queueNotTakingOver(t, rdb)
			if err := q.Enqueue(ctx, jobOfG()); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			// The first script run is the hand back's (the leave's comes
			// after Run's loop, with a context of its own).
			hook := newStopAt("evalsha", false, nil, cancel)
			rdb.AddHook(hook)
			w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Queue: q, Games: gameFails{code: tt.code}, Mover: NewBuiltin(1)}
			runUntilStopped(t, w, wctx, hook)

			takenByAnother(t, q, rdb, prefix, "the stopped worker's hand back failed with its stopped context")
		})
	}
}

// A read that wakes to a job in each lane keeps the player's and gives
// the background one back. Stopped while the read was on the wire (where
// a worker spends most of its time), the give back failed at once: the
// worker handed back the player's job as it stopped, and the background
// one stayed pending with it.
func TestAWorkerStoppedAsItReadsBothLanesHandsBothBack(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	q, prefix := queueNotTakingOver(t, rdb)
	other := redistest.Client(t)
	queued := false
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Both jobs come in just as the worker reads both lanes.
	before := newStopAt("xreadgroup", false, func(c redis.Cmder) bool {
		if len(c.Args()) < 10 || queued { // GROUP g c COUNT 1 [BLOCK n] STREAMS k1 k2 > >
			return false
		}
		queued = true
		j := jobOfG()
		if err := q.Enqueue(ctx, j); err != nil {
			t.Error(err)
		}
		j.GameID, j.Background = "bg", true
		raw, _ := json.Marshal(j)
		if err := other.XAdd(ctx, &redis.XAddArgs{Stream: prefix + "{ai}:jobs:background", Values: []any{"j", raw}}).Err(); err != nil {
			t.Error(err)
		}
		return false
	}, func() {})
	hook := newStopAt("xreadgroup", true, func(c redis.Cmder) bool {
		return len(c.(*redis.XStreamSliceCmd).Val()) == 2
	}, cancel)
	rdb.AddHook(before)
	rdb.AddHook(hook)
	w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Queue: q, Games: gameFails{code: codes.Unavailable}, Mover: NewBuiltin(1)}
	runUntilStopped(t, w, wctx, hook)

	var got []string
	for range 2 {
		d, err := q.Next(ctx, "w2", 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if d != nil {
			got = append(got, d.Job.GameID)
		}
	}
	if len(got) != 2 {
		p, _ := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: prefix + "{ai}:jobs:background", Group: "workers", Start: "-", End: "+", Count: 10}).Result()
		t.Fatalf("another worker got the jobs of games %v, want both g and bg handed back by the stopped worker; background lane pending: %+v", got, p)
	}
}

// gOnAShardDown is a game service that reads other games but answers
// Unavailable for game g (its Redis Cluster shard failing over): the
// worker hands g's job back for a retry at once (awaitGames reports false).
type gOnAShardDown struct{ gamev1.GameServiceClient }

func (gOnAShardDown) GetGame(_ context.Context, r *gamev1.GetGameRequest, _ ...grpc.CallOption) (*gamev1.GetGameResponse, error) {
	if r.GetGameId() == "g" {
		return nil, status.Error(codes.Unavailable, "shard failing over")
	}
	return nil, status.Error(codes.NotFound, "no such game")
}

// failFirstScript fails the first script call (the Retry hand back)
// with a Redis error, as a Redis failing over would, without running it.
type failFirstScript struct{ once sync.Once }

func (h *failFirstScript) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failFirstScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *failFirstScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" || cmd.Name() == "eval" {
			failed := false
			h.once.Do(func() { failed = true })
			if failed {
				err := errors.New("connection reset by peer")
				cmd.SetErr(err)
				return err
			}
		}
		return next(ctx, cmd)
	}
}

// stopOnLog is a log handler that stops the worker when it logs msg:
// a stop arriving just after the failed hand back was seen (handBackFor
// checked ctx) and before Run checks ctx again.
type stopOnLog struct {
	msg  string
	stop context.CancelFunc
}

func (h stopOnLog) Enabled(context.Context, slog.Level) bool { return true }
func (h stopOnLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.stop()
	}
	return nil
}
func (h stopOnLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h stopOnLog) WithGroup(string) slog.Handler      { return h }

// A job whose hand back for a retry failed (Redis failing over) is kept
// to try again, and handed back as the worker stops; a stop just after
// the failure was seen left it neither kept nor handed back.
func TestAWorkerStoppedAsItsRetryFailedHandsTheJobBack(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	q, prefix := queueNotTakingOver(t, rdb)
	if err := q.Enqueue(ctx, jobOfG()); err != nil {
		t.Fatal(err)
	}
	rdb.AddHook(&failFirstScript{})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &Worker{Name: "w", Log: slog.New(stopOnLog{msg: "ai job hand back", stop: cancel}), Queue: q, Games: gOnAShardDown{}, Mover: NewBuiltin(1),
		OutageWait: 50 * time.Millisecond}
	done := make(chan struct{})
	go func() { defer close(done); w.Run(wctx) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the worker did not stop")
	}
	takenByAnother(t, q, rdb, prefix, "the worker stopped just after its retry hand back failed kept it, neither held nor handed back")
}

// failFirstDeadLetter fails the first transaction that dead-letters a job
// (Bury's MULTI ... XADD dead ... EXEC), as a Redis failing over would,
// without running it.
type failFirstDeadLetter struct{ once sync.Once }

func (h *failFirstDeadLetter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failFirstDeadLetter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (h *failFirstDeadLetter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		bury := false
		for _, c := range cmds {
			if c.Name() == "xadd" {
				bury = true
			}
		}
		if bury {
			failed := false
			h.once.Do(func() { failed = true })
			if failed {
				err := errors.New("connection reset by peer")
				for _, c := range cmds {
					c.SetErr(err)
				}
				return err
			}
		}
		return next(ctx, cmds)
	}
}

// A try that failed otherwise than Unavailable (retried), a job whose
// commit had not shown (postponed) and one no worker can play
// (dead-lettered) whose hand back failed (a Redis failing over) were
// forgotten: a stop then, or any time before the claim timeout, left the
// job pending with the stopped worker.
func TestAWorkerStoppedAfterAFailedHandBackHandsTheJobBack(t *testing.T) {
	for _, tt := range []struct {
		name string
		code codes.Code
		msg  string
		hook redis.Hook
	}{
		{"retried", codes.Internal, "ai job hand back", &failFirstScript{}},
		{"postponed", codes.NotFound, "ai job hand back", &failFirstScript{}},
		{"dead-lettered", codes.PermissionDenied, "ai job dead-letter", &failFirstDeadLetter{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			rdb := redistest.Client(t)
			q, prefix := queueNotTakingOver(t, rdb)
			if err := q.Enqueue(ctx, jobOfG()); err != nil {
				t.Fatal(err)
			}
			rdb.AddHook(tt.hook)
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			w := &Worker{Name: "w", Log: slog.New(stopOnLog{msg: tt.msg, stop: cancel}), Queue: q, Games: gameFails{code: tt.code}, Mover: NewBuiltin(1),
				OutageWait: 50 * time.Millisecond}
			done := make(chan struct{})
			go func() { defer close(done); w.Run(wctx) }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				t.Fatal("the worker did not stop")
			}
			takenByAnother(t, q, rdb, prefix, "the worker stopped after its "+tt.name+" job's hand back failed forgot it, neither held nor handed back")
		})
	}
}
