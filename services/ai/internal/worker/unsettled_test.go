package worker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/aijobs"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// scriptsFailing makes the worker's script calls (its hand backs, its
// leave) fail at once (mode 1), or hang until their context ends, a Redis
// out of reach whose packets are dropped (mode 2); mode 0 lets them through.
type scriptsFailing struct{ mode atomic.Int32 }

func (h *scriptsFailing) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scriptsFailing) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *scriptsFailing) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" || cmd.Name() == "eval" {
			switch h.mode.Load() {
			case 1:
				err := errors.New("connection reset by peer")
				cmd.SetErr(err)
				return err
			case 2:
				<-ctx.Done()
				cmd.SetErr(ctx.Err())
				return ctx.Err()
			}
		}
		return next(ctx, cmd)
	}
}

// recordedLog records the worker's log records.
type recordedLog struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordedLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordedLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}
func (h *recordedLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordedLog) WithGroup(string) slog.Handler      { return h }

// handBacks lists the games of the "ai job hand back" records from the
// from-th on.
func (h *recordedLog) handBacks(from int) (games []string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, r := range h.recs {
		if r.Message != "ai job hand back" {
			continue
		}
		if i >= from {
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "game" {
					games = append(games, a.Value.String())
				}
				return true
			})
		}
		n++
	}
	return games, n
}

// awaitHandBacks waits for the n-th "ai job hand back" record: the
// worker's n-th hand back failed.
func (h *recordedLog) awaitHandBacks(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, got := h.handBacks(0); got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker never failed %d hand backs", n)
		}
	}
}

// running runs w until the returned stop is called.
func running(w *Worker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	return func() { cancel(); <-done }
}

func (h *recordedLog) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.recs)
}

// jobsTakenOverAfterFailedHandBacks runs a worker whose retry hand backs
// of the jobs of games g1 and g2 fail (its Redis failing over), then lets
// another worker take both jobs over and finish them: the first worker
// holds neither any more. It returns the running worker's script hook,
// log and stop.
func jobsTakenOverAfterFailedHandBacks(t *testing.T) (hook *scriptsFailing, log *recordedLog, stop func()) {
	t.Helper()
	ctx := context.Background()
	rdb := redistest.Client(t)
	q, prefix := queueNotTakingOver(t, rdb)
	hook = &scriptsFailing{}
	hook.mode.Store(1)
	rdb.AddHook(hook)
	for _, g := range []string{"g1", "g2"} {
		j := jobOfG()
		j.GameID = g
		if err := q.Enqueue(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	log = &recordedLog{}
	w := &Worker{Name: "w", Log: slog.New(log), Queue: q, Games: gameFails{code: codes.Internal}, Mover: NewBuiltin(1)}
	stop = running(w)
	t.Cleanup(stop)
	log.awaitHandBacks(t, 2)
	// Another worker, whose queue takes over a job idle for a moment, takes
	// both over and plays them.
	other := aijobs.New(redistest.Client(t), prefix)
	other.ClaimAfter, other.Lease = time.Millisecond, 0
	for range 2 {
		d, err := other.Next(ctx, "w2", 100*time.Millisecond)
		if err != nil || d == nil {
			t.Fatalf("the other worker's take over: %v %v", d, err)
		}
		if err := other.Done(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	return hook, log, stop
}

// Jobs whose hand back failed, then taken over and finished by another
// worker, stayed noted for ever (only the worker's own Next taking one
// again forgot it): each stop, its Redis out of reach again, warned of
// jobs it had not held for long, and waited a hand back's timeout for
// each. Once its Redis answers again, it hands them back (left alone by
// then) and forgets them.
func TestJobsNotHandedBackAreForgottenOnceRedisAnswers(t *testing.T) {
	hook, log, stop := jobsTakenOverAfterFailedHandBacks(t)
	hook.mode.Store(0)
	time.Sleep(2500 * time.Millisecond) // the worker's next look at the queue
	hook.mode.Store(1)
	from := log.len()
	stop()
	if games, _ := log.handBacks(from); len(games) > 0 {
		t.Fatalf("as it stopped the worker warned it could not hand back the jobs of games %v, which another worker took over and finished long before: it holds no job", games)
	}
}

// A job whose hand back failed waited for the claim timeout, or for the
// worker's stop, though its Redis answered again a moment later.
func TestAJobNotHandedBackIsHandedBackOnceRedisAnswers(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	q, prefix := queueNotTakingOver(t, rdb)
	hook := &scriptsFailing{}
	hook.mode.Store(1)
	rdb.AddHook(hook)
	if err := q.Enqueue(ctx, jobOfG()); err != nil {
		t.Fatal(err)
	}
	log := &recordedLog{}
	w := &Worker{Name: "w", Log: slog.New(log), Queue: q, Games: gameFails{code: codes.Internal}, Mover: NewBuiltin(1)}
	defer running(w)()
	log.awaitHandBacks(t, 1)
	hook.mode.Store(0)
	// Handed back, the job is taken again (by this worker, the only one)
	// and tried again: delivered a second time.
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		p, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: prefix + "{ai}:jobs", Group: "workers", Start: "-", End: "+", Count: 1}).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(p) == 1 && p[0].RetryCount >= 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job of game g, not handed back while Redis failed, was not handed back within 3 s of Redis answering again: pending %+v", p)
		}
	}
}

// addWithID adds j to the lane's stream under the given id.
func addWithID(t *testing.T, rdb redis.UniversalClient, prefix string, background bool, id string, j aijobs.Job) {
	t.Helper()
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	key := prefix + "{ai}:jobs"
	if background {
		key += ":background"
	}
	if err := rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: key, ID: id, Values: []any{"j", b}}).Err(); err != nil {
		t.Fatal(err)
	}
}

// The lanes' streams number their jobs alike, by the millisecond: a job of
// each queued in the same millisecond have one id. A worker stopping with
// a background job in hand skipped the noted interactive job of the same
// id, which waited out the claim timeout on the AI's clock.
func TestAStopHandsBackANotedJobOfTheOtherLaneWithTheSameID(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	q, prefix := queueNotTakingOver(t, rdb)
	const id = "1700000000000-0"
	ji := jobOfG()
	ji.GameID = "gi"
	jb := jobOfG()
	jb.GameID, jb.Background = "gb", true
	addWithID(t, rdb, prefix, false, id, ji)
	addWithID(t, rdb, prefix, true, id, jb)

	x, err := q.Next(ctx, "w", 10*time.Millisecond)
	if err != nil || x == nil || x.Job.GameID != "gi" {
		t.Fatalf("first Next: %+v %v, want the interactive job", x, err)
	}
	y, err := q.Next(ctx, "w", 10*time.Millisecond)
	if err != nil || y == nil || y.Job.GameID != "gb" {
		t.Fatalf("second Next: %+v %v, want the background job", y, err)
	}
	if x.ID != y.ID {
		t.Fatalf("ids %s and %s differ", x.ID, y.ID)
	}

	w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Queue: q}
	u := unsettledJobs{}
	u.note(x, false) // its retry's hand back failed earlier
	w.handBackOnStop(ctx, y, u)

	// Both handed back, another worker takes the interactive job first.
	d, err := q.Next(ctx, "w2", 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if d == nil || d.Job.GameID != "gi" {
		p, _ := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: prefix + "{ai}:jobs", Group: "workers", Start: "-", End: "+", Count: 10}).Result()
		t.Fatalf("another worker got %+v, want the interactive job of game gi: the stopping worker skipped it "+
			"(handBackOnStop compares ids only, and the held background job has the same id); it stays with the stopped worker until the claim timeout; interactive pending: %+v", d, p)
	}
}

// gbVoidOthersFailing answers GetGame for game "gb" with a game whose turn is not
// the AI's (its job is void, done at once) and fails every other game's
// with Internal (a retry).
type gbVoidOthersFailing struct{ gamev1.GameServiceClient }

func (gbVoidOthersFailing) GetGame(_ context.Context, in *gamev1.GetGameRequest, _ ...grpc.CallOption) (*gamev1.GetGameResponse, error) {
	if in.GetGameId() == "gb" {
		return &gamev1.GetGameResponse{Game: &gamev1.Game{GameId: "gb", Version: 2, Status: commonv1.GameStatus_GAME_STATUS_ONGOING, Turn: commonv1.Side_SIDE_SECOND}}, nil
	}
	return nil, status.Error(codes.Internal, "failing")
}

// Taking a background job of the same id as a noted interactive one made
// the worker forget it: not handed back once Redis answered again, the
// player's game waited out the claim timeout on the AI's clock.
func TestTakingABackgroundJobOfTheSameIDKeepsANotedJob(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	q, prefix := queueNotTakingOver(t, rdb)
	hook := &scriptsFailing{}
	hook.mode.Store(1)
	rdb.AddHook(hook)
	const id = "1700000000000-0"
	ji := jobOfG()
	ji.GameID = "gi"
	addWithID(t, rdb, prefix, false, id, ji)

	log := &recordedLog{}
	w := &Worker{Name: "w", Log: slog.New(log), Queue: q, Games: gbVoidOthersFailing{}, Mover: NewBuiltin(1)}
	defer running(w)()
	log.awaitHandBacks(t, 1)
	// A background job queued in the same millisecond: the worker takes it
	// (nothing of the interactive lane waits) and finishes it at once.
	jb := jobOfG()
	jb.GameID, jb.Background = "gb", true
	addWithID(t, rdb, prefix, true, id, jb)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n, err := rdb.XLen(ctx, prefix+"{ai}:jobs:background").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker never finished the background job")
		}
	}
	hook.mode.Store(0) // Redis answers again
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		p, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: prefix + "{ai}:jobs", Group: "workers", Start: "-", End: "+", Count: 1}).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(p) == 1 && p[0].RetryCount >= 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job of game gi, not handed back while Redis failed, was not handed back within 3 s of Redis answering again: "+
				"taking the background job %s (same id, other lane) dropped it from the unsettled jobs; pending %+v", id, p)
		}
	}
}

// A job whose commit had not shown, postponed uncounted (Queue.Postpone),
// was handed back once Redis answered again as a counted one: with
// --ai-job-attempts 1 the job, never tried, was dead-lettered, the game
// left on the AI's turn.
func TestAPostponeNotHandedBackStaysUncountedOnceRedisAnswers(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	q, prefix := queueNotTakingOver(t, rdb)
	q.MaxAttempts = 1
	hook := &scriptsFailing{}
	hook.mode.Store(1)
	rdb.AddHook(hook)
	if err := q.Enqueue(ctx, jobOfG()); err != nil {
		t.Fatal(err)
	}
	log := &recordedLog{}
	// The game is not there yet: the commit that queued the job has not
	// landed (or not shown on this replica).
	w := &Worker{Name: "w", Log: slog.New(log), Queue: q, Games: gameFails{code: codes.NotFound}, Mover: NewBuiltin(1)}
	defer running(w)()
	log.awaitHandBacks(t, 1)
	hook.mode.Store(0) // Redis answers again
	time.Sleep(3 * time.Second)
	dead, err := rdb.XRange(ctx, prefix+"{ai}:dead", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) > 0 {
		p, _ := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: prefix + "{ai}:jobs", Group: "workers", Start: "-", End: "+", Count: 1}).Result()
		t.Fatalf("the job whose commit had not shown, postponed (uncounted) but not handed back while Redis failed, was dead-lettered once Redis answered: %v (reason %q); settle handed it back as a counted HandBack, not as the Postpone it was; pending %+v",
			dead[0].Values["id"], dead[0].Values["reason"], p)
	}
}

// voidGames answers GetGame for every game with one whose turn is
// not the AI's (the job is void: done at once), and Canceled once the
// caller's context has ended, as a real gRPC client does.
type voidGames struct{ gamev1.GameServiceClient }

func (voidGames) GetGame(ctx context.Context, in *gamev1.GetGameRequest, _ ...grpc.CallOption) (*gamev1.GetGameResponse, error) {
	if ctx.Err() != nil {
		return nil, status.Error(codes.Canceled, ctx.Err().Error())
	}
	return &gamev1.GetGameResponse{Game: &gamev1.Game{GameId: in.GetGameId(), Version: 2, Status: commonv1.GameStatus_GAME_STATUS_ONGOING, Turn: commonv1.Side_SIDE_SECOND}}, nil
}

// failOnce fails, once, the first command named name for which match
// holds, with a connection error (a Redis failing over, a connection
// reset), without sending it.
type failOnce struct {
	name  string
	match func(redis.Cmder) bool
	once  sync.Once
}

func (h *failOnce) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failOnce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *failOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == h.name && (h.match == nil || h.match(cmd)) {
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

// deliveriesLookup matches Queue.deliveries' XPENDING key group id id 1:
// the look at a job's delivery count right after taking it over.
func deliveriesLookup(c redis.Cmder) bool {
	a := c.Args()
	return len(a) == 6 && a[3] == a[4] && a[3] != "-"
}

// A job taken over by XAUTOCLAIM is the worker's at once (pending with it,
// idle 0, its delivery counted); Next then reads its delivery count in a
// separate call. Should that call fail (one connection error, or the 5 s
// bound of taken() on a Redis failing over), Next returns the error and
// drops the job: it is neither returned to Run, nor noted as unsettled,
// nor handed back. It stays pending with a live worker that renews its
// lease, until the claim timeout (30 s on the AI's clock), and that
// second take-over counts one more delivery the job never had: with
// --ai-job-attempts the job is dead-lettered untried.
func TestAJobTakenOverWhoseCountWasNotReadIsHandedBack(t *testing.T) {
	for _, tt := range []struct {
		name        string
		claimAfter  time.Duration
		maxAttempts int64
	}{
		{"held for the claim timeout", time.Hour, 0},
		{"dead-lettered untried", time.Second, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			rdb := redistest.Client(t)
			q, prefix := queueNotTakingOver(t, rdb)
			q.ClaimAfter, q.MaxAttempts = tt.claimAfter, tt.maxAttempts
			if err := q.Enqueue(ctx, jobOfG()); err != nil {
				t.Fatal(err)
			}
			// A worker read the job, found its commit not shown yet, and
			// postponed it (uncounted) for the next worker to take now.
			d, err := q.Next(ctx, "gone", 100*time.Millisecond)
			if err != nil || d == nil {
				t.Fatalf("first read: %v %v", d, err)
			}
			if err := q.Postpone(ctx, "gone", d, 0); err != nil {
				t.Fatal(err)
			}
			rdb.AddHook(&failOnce{name: "xpending", match: deliveriesLookup})
			w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Queue: q, Games: voidGames{}, Mover: NewBuiltin(1)}
			defer running(w)()

			key := prefix + "{ai}:jobs"
			for deadline := time.Now().Add(4 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				dead, err := rdb.XRange(ctx, prefix+"{ai}:dead", "-", "+").Result()
				if err != nil {
					t.Fatal(err)
				}
				if len(dead) > 0 {
					t.Fatalf("the job, never tried (postponed uncounted, then taken over by w, whose look at its count failed once), was dead-lettered: %q. "+
						"Next dropped the job it had just taken over (aijobs.claimed: deliveries failed), so it was taken over again after the claim timeout, counted twice",
						dead[0].Values["reason"])
				}
				n, err := rdb.XLen(ctx, key).Result()
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					return // played (void) and acknowledged
				}
				if time.Now().After(deadline) {
					p, _ := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: key, Group: "workers", Start: "-", End: "+", Count: 10}).Result()
					t.Fatalf("4 s after one failed look at its delivery count, the job is still not played: Next took it over (XAUTOCLAIM), "+
						"then returned the error and dropped it; it stays pending with the live worker until the claim timeout (%v); pending %+v", q.ClaimAfter, p)
				}
			}
		})
	}
}

// A background job read as a player's job came in is given back
// (giveBack); should that hand back fail once (a connection reset), the job
// stays pending with the worker, which knows nothing of it: not noted
// with the unsettled jobs, it is not handed back once Redis answers again,
// and waits out the claim timeout on its AI's clock.
func TestABackgroundJobWhoseGiveBackFailedIsHandedBackOnceRedisAnswers(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	q, prefix := queueNotTakingOver(t, rdb)
	if err := q.ReadBothLanes(ctx); err != nil {
		t.Fatal(err)
	}
	jb := jobOfG()
	jb.GameID, jb.Background = "bg", true
	if err := q.Enqueue(ctx, jb); err != nil {
		t.Fatal(err)
	}
	other := redistest.Client(t)
	oq := aijobs.New(other, prefix)
	// A player's job comes in just after the read of both lanes took the
	// background one: Next reads it next, and gives the background one back.
	var once sync.Once
	rdb.AddHook(newStopAt("xreadgroup", true, func(c redis.Cmder) bool {
		if len(c.Args()) < 10 || len(c.(*redis.XStreamSliceCmd).Val()) == 0 {
			return false
		}
		once.Do(func() {
			if err := oq.Enqueue(ctx, jobOfG()); err != nil {
				t.Error(err)
			}
		})
		return false
	}, func() {}))
	rdb.AddHook(&failFirstScript{}) // the give back
	log := &recordedLog{}
	w := &Worker{Name: "w", Log: slog.New(log), Queue: q, Games: voidGames{}, Mover: NewBuiltin(1)}
	defer running(w)()

	bgKey := prefix + "{ai}:jobs:background"
	for deadline := time.Now().Add(4 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ni, err := rdb.XLen(ctx, prefix+"{ai}:jobs").Result()
		if err != nil {
			t.Fatal(err)
		}
		nb, err := rdb.XLen(ctx, bgKey).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ni == 0 && nb == 0 {
			return
		}
		if time.Now().After(deadline) {
			p, _ := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: bgKey, Group: "workers", Start: "-", End: "+", Count: 10}).Result()
			t.Fatalf("4 s on, interactive jobs left %d, background %d: the background job whose give back failed once stays pending with the running worker, "+
				"never handed back though Redis answers (it is not among the unsettled jobs), until the claim timeout (%v); pending %+v", ni, nb, q.ClaimAfter, p)
		}
	}
}

// loseReplyOnce runs, once, the first command named name that hands
// out a job, and then loses its reply (a connection reset after Redis ran
// it): the job is pending with the consumer, which never saw it.
type loseReplyOnce struct {
	name string
	once sync.Once
}

func (h *loseReplyOnce) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *loseReplyOnce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *loseReplyOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil || cmd.Name() != h.name {
			return err
		}
		got := false
		switch c := cmd.(type) {
		case *redis.XStreamSliceCmd:
			for _, s := range c.Val() {
				got = got || len(s.Messages) > 0
			}
		case *redis.XAutoClaimCmd:
			msgs, _ := c.Val()
			got = len(msgs) > 0
		}
		if !got {
			return nil
		}
		lost := false
		h.once.Do(func() { lost = true })
		if !lost {
			return nil
		}
		err = errors.New("connection reset by peer")
		cmd.SetErr(err)
		return err
	}
}

// A job whose XREADGROUP (or XAUTOCLAIM) ran in Redis but whose reply was
// lost (a connection reset, a read timeout; go-redis then sends the read
// again, which takes the next job, not this one) was pending with the live
// worker, which did not know of it: it waited out the claim timeout (30 s
// by default) on the AI's clock, and its take-over counted a delivery it
// never had (MaxAttempts). The worker lists its strays after a failed
// look at the queue, and hands them back.
func TestAJobWhoseReadReplyWasLostIsHandedBack(t *testing.T) {
	for _, cmd := range []string{"xreadgroup", "xautoclaim"} {
		t.Run(cmd, func(t *testing.T) {
			ctx := context.Background()
			rdb := redistest.Client(t)
			q, prefix := queueNotTakingOver(t, rdb)
			if err := q.Enqueue(ctx, jobOfG()); err != nil {
				t.Fatal(err)
			}
			if cmd == "xautoclaim" {
				// A job left by a worker that handed it back (Postpone):
				// taken over at once by the next to look.
				d, err := q.Next(ctx, "gone", 100*time.Millisecond)
				if err != nil || d == nil {
					t.Fatalf("first read: %v %v", d, err)
				}
				if err := q.Postpone(ctx, "gone", d, 0); err != nil {
					t.Fatal(err)
				}
			}
			rdb.AddHook(&loseReplyOnce{name: cmd})
			w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Queue: q, Games: voidGames{}, Mover: NewBuiltin(1)}
			defer running(w)()

			key := prefix + "{ai}:jobs"
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				n, err := rdb.XLen(ctx, key).Result()
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					return // played (void) and acknowledged
				}
				if time.Now().After(deadline) {
					p, _ := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: key, Group: "workers", Start: "-", End: "+", Count: 10}).Result()
					t.Fatalf("5 s after the reply of the %s that took it was lost, the job is still not played nor handed back: "+
						"it is pending with the running worker w, which never learnt of it, until the claim timeout (%v); pending %+v",
						cmd, q.ClaimAfter, p)
				}
			}
		})
	}
}

// countingFails fails every GetGame with code, counting the calls:
// one per try of the job.
type countingFails struct {
	gamev1.GameServiceClient
	code  codes.Code
	tries atomic.Int32
}

func (g *countingFails) GetGame(context.Context, *gamev1.GetGameRequest, ...grpc.CallOption) (*gamev1.GetGameResponse, error) {
	g.tries.Add(1)
	return nil, status.Error(g.code, "failing")
}

// failOnceAfterScript fails, once, the first command that match holds of
// once a script (the worker's hand back of its job) ran: a Redis blip as
// the worker next looks at the queue.
type failOnceAfterScript struct {
	match     func(redis.Cmder) bool
	scriptRan atomic.Bool
	failed    atomic.Bool
}

func (h *failOnceAfterScript) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failOnceAfterScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *failOnceAfterScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.match(cmd) && h.scriptRan.Load() && h.failed.CompareAndSwap(false, true) {
			err := errors.New("connection reset by peer")
			cmd.SetErr(err)
			return err
		}
		err := next(ctx, cmd)
		if err == nil && (cmd.Name() == "evalsha" || cmd.Name() == "eval") {
			h.scriptRan.Store(true)
		}
		return err
	}
}

// TestARetriedJobIsNoStray: a job whose try failed is handed back with
// Retry (counted, due again after retryDelay) and stays pending with its
// worker, which forgets it. One failed look at the queue later, Strays
// listed it among the worker's strays, and settle handed it back as never
// tried (Postpone): its count dropped by one, the failed try forgotten,
// and its retry delay was cut to nothing. With MaxAttempts 2 a job failing
// every time is tried twice, then dead-lettered.
func TestARetriedJobIsNoStray(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	q, prefix := queueNotTakingOver(t, rdb)
	q.MaxAttempts = 2
	if err := q.Enqueue(ctx, jobOfG()); err != nil {
		t.Fatal(err)
	}
	hook := &failOnceAfterScript{match: func(c redis.Cmder) bool { return c.Name() == "xreadgroup" }}
	rdb.AddHook(hook)
	games := &countingFails{code: codes.Internal}
	w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Queue: q, Games: games, Mover: NewBuiltin(1)}
	stop := running(w)
	defer stop()
	for deadline := time.Now().Add(8 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		dead, err := rdb.XLen(ctx, prefix+"{ai}:dead").Result()
		if err != nil {
			t.Fatal(err)
		}
		if dead > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job not dead-lettered within 8 s; tries %d", games.tries.Load())
		}
	}
	stop()
	if !hook.failed.Load() {
		t.Fatal("the look at the queue never failed")
	}
	if n := games.tries.Load(); n != 2 {
		t.Fatalf("the job, failing every try, was tried %d times before it was dead-lettered, want 2 (MaxAttempts 2): "+
			"after one failed look at the queue (Next marks w doubtful), Strays listed the job w had handed back with Retry and "+
			"still pending with w; noteStrays took it for a stray, and settle handed it back with Postpone, "+
			"setting its count to the try's attempt less one: the failed try was forgotten", n)
	}
}

// loseReadAndStop runs the first XREADGROUP that hands out a job,
// loses its reply (a connection reset after Redis ran it) and stops the
// worker: a Redis blip as the worker process is being stopped (a rolling
// restart during a failover).
type loseReadAndStop struct {
	stop context.CancelFunc
	done atomic.Bool
}

func (h *loseReadAndStop) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *loseReadAndStop) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *loseReadAndStop) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil || cmd.Name() != "xreadgroup" || h.done.Load() {
			return err
		}
		got := false
		for _, s := range cmd.(*redis.XStreamSliceCmd).Val() {
			got = got || len(s.Messages) > 0
		}
		if !got || !h.done.CompareAndSwap(false, true) {
			return nil
		}
		h.stop()
		err = errors.New("connection reset by peer")
		cmd.SetErr(err)
		return err
	}
}

// TestAStrayIsHandedBackAsTheWorkerStops: the read that took a job lost
// its reply, and the worker was stopped before its next look at the queue
// (it waits a second after a failed one). Its stop handed back the job in
// hand and the unsettled ones, never its strays, though Redis answered:
// the job stayed pending with the stopped consumer (Leave keeps a consumer
// holding a job) until another worker took it over once its lease lapsed,
// counting a delivery it never had: with --ai-job-attempts 1 it was
// dead-lettered untried, the game left on the AI's turn for good.
func TestAStrayIsHandedBackAsTheWorkerStops(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	q, prefix := queueNotTakingOver(t, rdb)
	if err := q.Enqueue(ctx, jobOfG()); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rdb.AddHook(&loseReadAndStop{stop: cancel})
	w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Queue: q, Games: voidGames{}, Mover: NewBuiltin(1)}
	done := make(chan struct{})
	go func() { defer close(done); w.Run(wctx) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not stop")
	}
	// Another worker process, whose queue takes over the jobs of workers
	// whose lease lapsed (the stopped worker's, ended by Leave).
	other := aijobs.New(redistest.Client(t), prefix)
	other.ClaimAfter, other.Lease, other.MaxAttempts = time.Hour, 100*time.Millisecond, 1
	time.Sleep(200 * time.Millisecond)
	var d *aijobs.Delivery
	for deadline := time.Now().Add(3 * time.Second); d == nil && time.Now().Before(deadline); {
		var err error
		if d, err = other.Next(ctx, "w2", 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if d == nil {
			if n, _ := rdb.XLen(ctx, prefix+"{ai}:dead").Result(); n > 0 {
				break
			}
		}
	}
	dead, err := rdb.XRange(ctx, prefix+"{ai}:dead", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) > 0 {
		t.Fatalf("the job, never tried (its read's reply lost, the worker stopped a moment later), was dead-lettered when another worker took it over: %q. "+
			"handBackOnStop never lists the worker's strays (Queue.Strays): the job stayed pending with the stopped consumer at count 1 and its take over counted a second delivery",
			dead[0].Values["reason"])
	}
	if d == nil || d.Attempt != 1 {
		t.Fatalf("another worker got %+v, want the job at its first attempt", d)
	}
}

// TestARetriedJobRetakenInAFailedLookIsHandedBack: the worker's try fails,
// it retries the job (Retry, due again in 500 ms) and, as the only worker,
// takes it back itself; that take over's look at the count fails, so the
// Next fails and the job is pending with the worker, unknown to it: a
// stray, which its Queue took for one it had handed back, left to wait out
// the claim timeout (here an hour; --ai-claim-after 30 s by default) while
// the AI's clock ran.
func TestARetriedJobRetakenInAFailedLookIsHandedBack(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	q, _ := queueNotTakingOver(t, rdb)
	q.MaxAttempts = 5
	if err := q.Enqueue(ctx, jobOfG()); err != nil {
		t.Fatal(err)
	}
	// The look at its count as it takes the job back.
	hook := &failOnceAfterScript{match: func(c redis.Cmder) bool { return c.Name() == "xpending" && deliveriesLookup(c) }}
	rdb.AddHook(hook)
	games := &countingFails{code: codes.Internal}
	w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Queue: q, Games: games, Mover: NewBuiltin(1)}
	stop := running(w)
	defer stop()
	deadline := time.Now().Add(6 * time.Second)
	for games.tries.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !hook.failed.Load() {
		t.Fatal("the look at the retaken job's count never failed")
	}
	if n := games.tries.Load(); n < 2 {
		t.Fatalf("the job was tried %d time(s) in 6 s, want its retry within ~2 s (retry delay 500 ms, a second's pause after the failed look): "+
			"the take over that failed left it pending with w, idle from 0, and Strays left it out as one w handed back (its book entry is cleared "+
			"only when a Next returns the job), so it waits out ClaimAfter (%v)", n, q.ClaimAfter)
	}
}
