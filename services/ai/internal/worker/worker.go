// Package worker plays the AI seats: it takes "AI to move" jobs from the
// Redis queue and submits the moves through the game service's public
// API as the AI seat, like any client.
package worker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/aijobs"
	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/auth"
	"github.com/palacehq/palace/pkg/engine"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/pkg/rulespb"
)

// Mover finds the AI's move; the built-in engine or an external UCI one.
// budget, when positive, is the most the search may take: the game's
// clock leaves no more (thinkBudget).
type Mover interface {
	Move(ctx context.Context, v rules.Variant, startFEN string, moves []rules.Move, level int, seed uint64, budget time.Duration) (rules.Move, uint64, error)
}

// Builtin plays with pkg/engine at the seat's level.
type Builtin struct {
	e *engine.Engine
	// cleared is closed once the table is ready for the next search:
	// touched, then cleared after each search.
	cleared chan struct{}
}

// NewBuiltin returns a built-in mover with its own transposition table,
// touched in the background (engine.Touch) before its first search.
func NewBuiltin(hashMB int) *Builtin {
	touched := make(chan struct{})
	b := &Builtin{e: engine.New(engine.Options{HashMB: hashMB}), cleared: touched}
	go func() {
		defer close(touched)
		b.e.Touch()
	}()
	return b
}

// Ready is closed once the table is ready for a search.
func (b *Builtin) Ready() <-chan struct{} { return b.cleared }

// Move searches within budget, which counts from the call: a clear of the
// table still under way comes out of it.
func (b *Builtin) Move(ctx context.Context, v rules.Variant, startFEN string, moves []rules.Move, level int, seed uint64, budget time.Duration) (rules.Move, uint64, error) {
	called := time.Now()
	start, err := rules.ParseFEN(v, startFEN)
	if err != nil {
		return rules.NoMove, 0, err
	}
	// Each move depends only on the game and the seed, so a job taken over
	// by another worker plays the same move, unless the clock cuts the
	// search short: the table is cleared between searches. After one, off
	// the AI's clock: now and then a clear zeroes the whole table, a pass
	// over all of it (seconds for gigabytes, the first time).
	select {
	case <-b.cleared:
	case <-ctx.Done():
		return rules.NoMove, 0, ctx.Err()
	}
	lim := engine.Level(level).Limits(seed)
	if budget > 0 {
		left := max(budget-time.Since(called), time.Millisecond)
		if lim.MoveTime == 0 || left < lim.MoveTime {
			lim.MoveTime = left
		}
	}
	r, err := b.e.Search(ctx, start, moves, lim, nil)
	done := make(chan struct{})
	b.cleared = done
	go func() {
		defer close(done)
		b.e.Clear()
	}()
	return r.Move, r.Nodes, err
}

// Metrics of the pool, for autoscaling.
type Metrics struct {
	Wait  metric.Float64Histogram
	Jobs  metric.Int64Counter
	Nodes metric.Int64Counter
	Think metric.Float64Histogram
}

// LaneAttr labels a queue metric with the lane of its jobs, so that an
// operator scales the workers on the wait of games a person plays, which
// background jobs do not delay.
func LaneAttr(background bool) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String("lane", aijobs.LaneName(background)))
}

// Worker takes jobs one at a time.
type Worker struct {
	Name    string
	Log     *slog.Logger
	Queue   *aijobs.Queue
	Games   gamev1.GameServiceClient
	Mover   Mover
	Metrics *Metrics
	// OutageWait bounds the wait, within one job, for a game service that
	// answers Unavailable (0: DefaultOutageWait).
	OutageWait time.Duration

	// redisAheadMs is how far Redis' clock, which dates jobs, runs ahead
	// of this host's, as the worker last measured it (keepAlive).
	redisAheadMs atomic.Int64
}

// redisNow is the time by Redis' clock, as far as the worker can tell
// without asking: a job's age is measured by it, since the game service
// dates jobs by it (Job.EnqueuedMs), and a host whose clock is set apart
// would take a job queued a moment ago for a void one minutes old.
func (w *Worker) redisNow() time.Time {
	return time.Now().Add(time.Duration(w.redisAheadMs.Load()) * time.Millisecond)
}

// measureRedisClock learns how far Redis' clock runs ahead of this host's.
func (w *Worker) measureRedisClock(ctx context.Context) error {
	before := time.Now()
	t, err := w.Queue.Time(ctx)
	if err != nil {
		return err
	}
	asked := before.Add(time.Since(before) / 2)
	w.redisAheadMs.Store(t.Sub(asked).Milliseconds())
	return nil
}

// readier is a Mover that needs a moment before its first move (a
// built-in engine touching a large table): the worker takes no job until
// it is ready, so that the wait is not spent on a game's clock.
type readier interface{ Ready() <-chan struct{} }

// Run works until ctx ends.
func (w *Worker) Run(ctx context.Context) {
	if r, ok := w.Mover.(readier); ok {
		select {
		case <-r.Ready():
		case <-ctx.Done():
			return
		}
	}
	defer w.leave(ctx)
	defer w.keepAlive(ctx)()
	// retryAt is when the job this worker last handed back for a retry is
	// due: the worker looks then, however quiet the queue.
	var retryAt time.Time
	// held is a job still pending with this worker, to try again at once.
	var held *aijobs.Delivery
	unsettled := unsettledJobs{}
	defer func() { w.handBackOnStop(ctx, held, unsettled) }()
	for ctx.Err() == nil {
		d := held
		held = nil
		if d == nil {
			// Before the next look, which could take a job noted over
			// again, and count a delivery it never had.
			w.noteStrays(ctx, unsettled)
			w.settle(ctx, unsettled)
			var err error
			d, err = w.Queue.Next(ctx, w.Name, nextWait(retryAt))
			if d != nil {
				delete(unsettled, d.Key()) // taken again: in hand
			}
			if err != nil {
				w.Log.WarnContext(ctx, "ai queue", "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
			if d == nil {
				continue
			}
			if w.Metrics != nil {
				w.Metrics.Wait.Record(ctx, float64(w.redisNow().UnixMilli()-d.Job.EnqueuedMs)/1000, LaneAttr(d.Background()))
			}
		}
		if err := w.Handle(ctx, d.Job); err != nil {
			if ctx.Err() != nil {
				// Stopping mid-job: handed back at the stop.
				held = d
				continue
			}
			var early *commitNotShown
			if errors.As(err, &early) {
				if retryAt = w.postpone(ctx, d, early); retryAt.IsZero() {
					unsettled.note(d, true)
				}
				continue
			}
			var dead *unplayable
			if errors.As(err, &dead) {
				if err := w.Queue.Bury(ctx, d, dead.Error()); err != nil {
					// Another worker buries it, once it takes it over.
					if ctx.Err() == nil {
						w.Log.WarnContext(ctx, "ai job dead-letter", "game", d.Job.GameID, "err", err)
					}
					unsettled.note(d, false)
				}
				continue
			}
			// Handle settles every job that is void (the game moved on,
			// ended or is gone); any other error leaves the AI to act, so the job
			// stays pending, here or for another worker. Acknowledging it would
			// strand the game.
			if status.Code(err) == codes.Unavailable {
				// Taken over after the claim timeout by a worker whose
				// game service answers, or tried again by this one as
				// soon as its own answers: waiting out the rest of the
				// claim timeout then would cost the AI's clock that much.
				// Handing it back instead can fail, the worker's Redis
				// not yet reached again. Should both try, the move's
				// request id lets one commit.
				w.Log.WarnContext(ctx, "ai job", "game", d.Job.GameID, "err", err)
				if w.awaitGames(ctx, d.Job) {
					held = d
					continue
				}
				if ctx.Err() != nil {
					// Stopped while waiting for the game service: handed
					// back at the stop.
					held = d
					continue
				}
				// The game service reads the game but takes no move for
				// it, or came back at once, or cannot read it still (its
				// shard failing over, say): handed back, as any failure,
				// so that other games' jobs are not held up; kept, should
				// the queue's Redis not take it back yet.
				if retryAt = w.retry(ctx, d, err); retryAt.IsZero() {
					held = d
				}
				continue
			}
			if retryAt = w.retry(ctx, d, err); retryAt.IsZero() {
				unsettled.note(d, false)
			}
			continue
		}
		// Acknowledged even when shutdown began meanwhile: the move is
		// made, and a job left pending would only be played again, void.
		ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
		err := w.Queue.Done(ackCtx, d)
		cancel()
		if err != nil {
			w.Log.WarnContext(ctx, "ai job ack", "game", d.Job.GameID, "err", err)
		}
	}
}

// unsettledJobs are the jobs still pending with a worker that it could
// not hand back (its Redis failing over, say): handed back once its Redis
// takes them again, else as the worker stops, for another worker to take
// at once. A hand back leaves alone a job another worker took over
// meanwhile (its claim timeout passed), so each is forgotten once handed
// back. Only an outage adds to them, and no job is taken during one.
type unsettledJobs map[aijobs.JobKey]unsettledJob

type unsettledJob struct {
	d *aijobs.Delivery
	// untried is set for a job postponed, whose delivery is not to count
	// towards its attempts (Queue.Postpone).
	untried bool
}

func (u unsettledJobs) note(d *aijobs.Delivery, untried bool) {
	u[d.Key()] = unsettledJob{d: d, untried: untried}
}

// handBack hands back j for another worker to take now.
func (w *Worker) handBack(ctx context.Context, j unsettledJob) error {
	if j.untried {
		return w.Queue.Postpone(ctx, w.Name, j.d, 0)
	}
	return w.Queue.HandBack(ctx, w.Name, j.d)
}

// noteStrays notes in u, as never tried, the jobs pending with the worker
// that it does not know of (Queue.Strays): it holds none in hand here. Not
// listed yet (Redis still away), they are listed at the next call.
func (w *Worker) noteStrays(ctx context.Context, u unsettledJobs) {
	ds, err := w.Queue.Strays(ctx, w.Name)
	if err != nil {
		return
	}
	for _, d := range ds {
		if _, known := u[d.Key()]; !known {
			u.note(d, true)
		}
	}
}

// settle hands back again the jobs of u, and forgets those it handed
// back. The first hand back that fails leaves the rest for the next try:
// Redis is still away.
func (w *Worker) settle(ctx context.Context, u unsettledJobs) {
	for k, j := range u {
		if err := w.handBack(ctx, j); err != nil {
			return
		}
		delete(u, k)
	}
}

// handBackOnStop hands back held, which the worker holds as it stops, then
// its strays and the jobs of u: they stay pending, handed back so that
// another worker takes them over now, not after the claim timeout (or its
// lease), counting a delivery a stray never had. All within one
// leaveTimeout, held first, should Redis be out of reach.
func (w *Worker) handBackOnStop(ctx context.Context, held *aijobs.Delivery, u unsettledJobs) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
	defer cancel()
	if held != nil {
		delete(u, held.Key())
		if err := w.handBack(ctx, unsettledJob{d: held}); err != nil {
			w.Log.WarnContext(ctx, "ai job hand back", "game", held.Job.GameID, "err", err)
			u.note(held, false) // no stray: tried again below
		}
	}
	w.noteStrays(ctx, u)
	for _, j := range u {
		if err := w.handBack(ctx, j); err != nil {
			w.Log.WarnContext(ctx, "ai job hand back", "game", j.d.Job.GameID, "err", err)
		}
	}
}

// retry hands back d, whose try failed with err, for another try soon
// (retryDelay), and returns when that is due. The AI's clock runs: an
// engine replaced or a game service's passing error should cost it a
// moment, not the claim timeout.
func (w *Worker) retry(ctx context.Context, d *aijobs.Delivery, err error) time.Time {
	return w.handBackFor(ctx, d, retryDelay(d.Attempt, w.Queue.ClaimAfter), err, w.Queue.Retry)
}

// handBackFor hands d back with hand (Queue.Retry or Queue.Postpone), for
// another look after after, and returns when that is due; why is what kept
// d from being done.
func (w *Worker) handBackFor(ctx context.Context, d *aijobs.Delivery, after time.Duration, why error,
	hand func(context.Context, string, *aijobs.Delivery, time.Duration) error) time.Time {
	w.Log.WarnContext(ctx, "ai job", "game", d.Job.GameID, "attempt", d.Attempt, "retry_in", after, "err", why)
	if err := hand(ctx, w.Name, d, after); err != nil {
		// Still pending: taken over after the claim timeout, or handed
		// back as the worker stops.
		if ctx.Err() == nil {
			w.Log.WarnContext(ctx, "ai job hand back", "game", d.Job.GameID, "err", err)
		}
		return time.Time{}
	}
	return time.Now().Add(after)
}

// commitNotShown is why a job was not tried: the commit that queued it has
// not shown yet, age after it was queued.
type commitNotShown struct {
	game    string
	version uint64
	age     time.Duration
}

func (e *commitNotShown) Error() string {
	return fmt.Sprintf("game %s: the commit that queued the job, at version %d, has not shown %v after it", e.game, e.version, e.age.Round(time.Second))
}

// postpone hands back d, whose commit has not shown, for a look a quarter
// of its age later (between 250 ms and 15 s), uncounted (Queue.Postpone),
// and returns when that is due: a commit that lands meanwhile is played at
// most that late, on the AI's clock, unless its game service queues the
// job again.
func (w *Worker) postpone(ctx context.Context, d *aijobs.Delivery, why *commitNotShown) time.Time {
	return w.handBackFor(ctx, d, min(max(why.age/4, 250*time.Millisecond), 15*time.Second), why, w.Queue.Postpone)
}

// retryFirst is the wait before a failed job's first retry; it doubles
// with each delivery, up to the claim timeout: a job that fails every
// time does not keep the workers busy.
const retryFirst = 500 * time.Millisecond

// retryDelay is the wait before the retry of a job whose attempt-th
// delivery failed.
func retryDelay(attempt int64, most time.Duration) time.Duration {
	d := retryFirst
	for i := int64(1); i < attempt && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

// nextWait is how long the worker waits for a new job: a second, or less
// if a job it handed back for a retry is due before, so that the job is
// taken again on time even when no worker comes to the queue meanwhile.
func nextWait(retryAt time.Time) time.Duration {
	wait := time.Until(retryAt)
	if wait <= 0 || wait >= time.Second {
		return time.Second
	}
	// Redis waits whole milliseconds, for ever on 0: never wake before it.
	return wait.Truncate(time.Millisecond) + time.Millisecond
}

// awaitGames takes no job while the game service stays out of reach (past
// outageWait within a job): the jobs go to workers whose game service
// answers, and this one tries its job again at once when its own answers
// first. It asks for j's game every second, and reports whether it waited
// for an answer other than Unavailable and got one. A game service that
// answers at once was not out of reach; one that reads other games fails
// j's alone (its Redis Cluster shard failing over, say), which must not
// keep the worker from the other games: then it reports false at once.
func (w *Worker) awaitGames(ctx context.Context, j aijobs.Job) (back bool) {
	seat := asSeat(ctx, j)
	waited := false
	for {
		_, err := w.Games.GetGame(seat, &gamev1.GetGameRequest{GameId: j.GameID})
		if status.Code(err) != codes.Unavailable {
			if waited {
				w.Log.InfoContext(ctx, "ai worker: the game service answers again")
			}
			return waited
		}
		if w.readsOthers(seat) {
			return false
		}
		if !waited {
			w.Log.WarnContext(ctx, "ai worker: the game service is out of reach; taking no job until it answers")
			waited = true
		}
		if sleep(ctx, time.Second) != nil {
			return false
		}
	}
}

// readsOthers reports whether the game service reads games: asked for one
// that does not exist, in a hash slot of its own each time, it answers
// anything but Unavailable (NotFound).
func (w *Worker) readsOthers(seat context.Context) bool {
	_, err := w.Games.GetGame(seat, &gamev1.GetGameRequest{GameId: "ai-probe-" + rand.Text()})
	return status.Code(err) != codes.Unavailable
}

// asSeat is ctx carrying the credential of j's seat.
func asSeat(ctx context.Context, j aijobs.Job) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+j.Token)
}

// leaveTimeout bounds the calls that outlive a stopping worker's context:
// the acknowledgement of its last job, and its leaving the group.
const leaveTimeout = 5 * time.Second

// keepAlive renews the worker's lease now and then four times a lease,
// while it searches too, until the returned stop is called: should the
// worker die, its job is taken over once the lease lapses.
func (w *Worker) keepAlive(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	// Each trouble is told once, when it begins, and apart: a lease not
	// renewed risks a takeover; a clock not read only leaves job ages to
	// this host's clock.
	var failing, unmeasured bool
	renew := func() {
		err := w.Queue.KeepAlive(ctx, w.Name)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			w.Log.WarnContext(ctx, "ai worker lease: not renewed; others may take over its job", "err", err)
			failing = true
		case err == nil:
			failing = false
		}
		err = w.measureRedisClock(ctx)
		switch {
		case err != nil && !unmeasured && ctx.Err() == nil:
			w.Log.WarnContext(ctx, "ai worker: cannot read redis' clock; the ages of jobs are measured by this host's clock, as last set against redis'", "err", err)
			unmeasured = true
		case err == nil:
			unmeasured = false
		}
	}
	renew()
	if w.Queue.Lease <= 0 {
		return cancel
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(w.Queue.Lease / 4)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				renew()
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// leave takes the worker's consumer out of the queue's group as it stops,
// or every restart of a worker process would add consumers that stay
// listed for ever. One holding a job stays, for the job to be claimed.
func (w *Worker) leave(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
	defer cancel()
	left, err := w.Queue.Leave(ctx, w.Name)
	switch {
	case err != nil:
		w.Log.WarnContext(ctx, "ai queue leave", "err", err)
	case !left:
		w.Log.InfoContext(ctx, "ai worker stopped holding a job; another worker takes it over")
	}
}

// PruneConsumers deletes the queue's consumers idle for idle that hold no
// job (those of worker processes that were killed, or stopped holding a
// job, and never left): at once, then every interval every, until ctx ends.
// Every worker process prunes; deleting twice does no harm.
func PruneConsumers(ctx context.Context, log *slog.Logger, q *aijobs.Queue, every, idle time.Duration) {
	for {
		n, err := q.Prune(ctx, idle)
		switch {
		case err != nil && ctx.Err() == nil:
			log.WarnContext(ctx, "ai queue prune", "err", err)
		case n > 0:
			log.InfoContext(ctx, "ai queue: deleted idle consumers", "consumers", n, "idle", idle)
		}
		if sleep(ctx, every) != nil {
			return
		}
	}
}

// unplayable is Handle's error for a job that no worker could ever play:
// the game service refused it for what it is, not for the moment. Such a
// job is dead-lettered, not left pending.
type unplayable struct{ Err error }

func (u *unplayable) Error() string { return u.Err.Error() }
func (u *unplayable) Unwrap() error { return u.Err }

// Handle plays one job: at most one move, whatever happens to this or any
// other worker holding the same job, because the move's request id is
// derived from the game and the version it was chosen at.
func (w *Worker) Handle(ctx context.Context, j aijobs.Job) error {
	side, err := rules.ParseSide(j.Side)
	if err != nil {
		// The queue dead-letters such jobs as it reads them; one handed
		// over otherwise is not played for a side it does not name.
		return fmt.Errorf("job of game %s: %w", j.GameID, err)
	}
	seat := asSeat(ctx, j)
	var last chosen
	var refused *refusal
	var unseen time.Time // when the commit that queued j was first missed
	changes := 0
	// A game service that cannot answer for a moment (its Redis restarting
	// or failing over, the service itself restarting) is waited for here,
	// up to OutageWait, rather than the job being left for the claim
	// timeout: the AI would move that much later, and search again. The
	// move's request id makes sending it again safe.
	var outage time.Time
	var backoff time.Duration
	alone := false
	waitOut := func(err error) bool {
		if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			return false
		}
		if outage.IsZero() {
			outage = time.Now()
		}
		if time.Since(outage) >= w.outageWait() {
			return false
		}
		// Out for this game alone (its Redis Cluster shard failing over),
		// twice in a row, while the service reads others: not waited for,
		// but handed back, so that it keeps the worker from no other game.
		if w.readsOthers(seat) {
			if alone {
				return false
			}
			alone = true
		} else {
			alone = false
		}
		backoff = min(max(2*backoff, 100*time.Millisecond), time.Second)
		return sleep(ctx, backoff) == nil
	}
	// notYet waits a moment for the commit that queued the job, which the
	// game service queues before committing; false once commitWait has
	// passed. A worker waiting on its queue reads a job as soon as it is
	// queued, often before that commit lands a millisecond later: the
	// first looks come quickly, or the AI's reply would wait a whole
	// pause, on its clock too. A job still younger than commitGiveUp is
	// then postponed (commitNotShown), and looks once at each later try:
	// the commit may land late (a game service stalled, or waiting on
	// replicas), and its answer may be lost on the way, so that nothing
	// queues the job again. An older one is void: the commit failed.
	var pause time.Duration
	marked := false
	notYet := func() (bool, error) {
		if unseen.IsZero() {
			unseen = time.Now()
		}
		var age time.Duration
		if j.EnqueuedMs != 0 {
			age = w.redisNow().Sub(time.UnixMilli(j.EnqueuedMs))
		}
		// A job past commitWait already (a later try) looks once.
		if time.Since(unseen) > commitWait || age > commitWait {
			if !marked {
				// Its game service queues it again should the commit
				// land now, for the AI's clock runs from then on. One more
				// look after the mark: a commit that landed before it,
				// after this worker's last look, found no mark to take.
				marked = true
				if err := w.Queue.MarkUnseen(ctx, j); err != nil {
					w.Log.WarnContext(ctx, "ai job", "game", j.GameID, "err", err)
				}
				return true, nil
			}
			if j.EnqueuedMs != 0 && age < commitGiveUp {
				return false, &commitNotShown{game: j.GameID, version: j.Version, age: age}
			}
			return false, nil
		}
		pause = min(max(2*pause, commitPollMin), commitPollMax)
		return true, sleep(ctx, pause)
	}
	for {
		asked := time.Now()
		resp, err := w.Games.GetGame(seat, &gamev1.GetGameRequest{GameId: j.GameID})
		switch {
		case waitOut(err):
			continue
		case status.Code(err) == codes.NotFound:
			// A game's first job (a Janggi formation, or a first move) is
			// queued before the commit that creates the game: not there
			// yet, or gone.
			if again, err := notYet(); !again || err != nil {
				return err
			}
			continue
		case status.Code(err) == codes.Unauthenticated && apierr.ReasonOf(err) == auth.ExpiredReason:
			return nil // the job outlived its credential, which lives as long as a seat's
		case status.Code(err) == codes.Unauthenticated && apierr.ReasonOf(err) == auth.KeyUnknownReason:
			// A game service that does not know the credential's key: this
			// worker is not the game's (another deployment sharing the
			// queue, or keys out of step). Left pending, the job goes to a
			// worker whose game service knows it.
			return fmt.Errorf("game %s refused the job's credential: %w", j.GameID, err)
		case status.Code(err) == codes.Unauthenticated, status.Code(err) == codes.PermissionDenied, status.Code(err) == codes.InvalidArgument:
			// A credential malformed, forged or for another seat, or a
			// game id no game can have: no worker could ever play it.
			return &unplayable{Err: fmt.Errorf("game %s refused the job: %w", j.GameID, err)}
		}
		if err != nil {
			return err
		}
		g := resp.GetGame()
		if g.GetVersion() < j.Version {
			// The commit that queued the job is not visible yet (it may be
			// waiting for replicas).
			if again, err := notYet(); !again || err != nil {
				return err
			}
			continue
		}
		if g.GetTurn() != rulespb.Side(side) {
			return nil
		}
		var res outcome
		switch {
		case refused != nil && refused.version == g.GetVersion():
			// Refused in the very state the action was chosen for, which is
			// still the AI's to act in: the move was bad (an engine's
			// nonsense, or a bug), not the game moving on. Left pending, the
			// job is tried again (an external engine is replaced by then)
			// until the queue dead-letters it.
			return fmt.Errorf("game %s refused the AI's action at version %d: %w", j.GameID, refused.version, refused.err)
		case j.Kind == aijobs.KindFormation && g.GetStatus() == commonv1.GameStatus_GAME_STATUS_SETUP:
			res, err = w.formation(seat, g, j, side)
		case j.Kind == aijobs.KindMove && g.GetStatus() == commonv1.GameStatus_GAME_STATUS_ONGOING:
			res, err = w.move(seat, g, j, &last, asked)
		default:
			return nil
		}
		switch {
		case res == refusedHere:
			// Look again: only a game that stayed put shows the refusal
			// was about the action itself.
			refused = &refusal{version: g.GetVersion(), err: err}
			last = chosen{} // never send a refused move again unsearched
		case waitOut(err):
			continue
		case err != nil:
			return err
		case res == finished:
			return nil
		}
		// The game moved on while we thought (a presence or clock event):
		// look again. Left pending, a job that keeps losing is tried again.
		if changes++; changes > 20 {
			return errors.New("the game keeps changing under the AI's move")
		}
	}
}

// commitWait bounds a try's wait for the commit that queued a job to
// show; the worker looks again after commitPollMin, doubling up to
// commitPollMax. Past it the job is postponed, not waited on: a commit
// that never lands (its game service died after queueing the job) would
// keep the worker from every other game's job, on their AI's clocks.
const (
	commitWait    = time.Second
	commitPollMin = 5 * time.Millisecond
	commitPollMax = 100 * time.Millisecond
	// commitGiveUp is how long after it was queued a job whose commit has
	// not shown is kept for another try; past it the job is void.
	commitGiveUp = 2 * time.Minute
)

// DefaultOutageWait is shorter than the default claim timeout (30 s),
// after which another worker may take the job over.
const DefaultOutageWait = 20 * time.Second

func (w *Worker) outageWait() time.Duration {
	if w.OutageWait > 0 {
		return w.OutageWait
	}
	return DefaultOutageWait
}

// chosen is the move computed for one position (its start and moves), so
// that a move refused only because the game's version moved on (a
// presence or clock event) is sent again at once, not searched again.
type chosen struct {
	position string
	move     rules.Move
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func seedOf(id string, ply int) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", id, ply)
	return h.Sum64()
}

// outcome is where an attempt to act leaves a job.
type outcome int

const (
	// finished: the AI acted, or never can at this job (the job is void).
	finished outcome = iota
	// lookAgain: the game's version moved on under the action.
	lookAgain
	// refusedHere: the game service refused the action in the state it
	// was chosen for. That is the job's end if the game has since moved
	// on (it ended, or another worker's move won the same request id),
	// and a bad action if not.
	refusedHere
)

// refusal is the game service's refusal of an action at a version.
type refusal struct {
	version uint64
	err     error
}

// settled maps the game service's answer to an action. A refused move
// (InvalidArgument) or one the state forbids (FailedPrecondition) is
// settled by reading the game again, never taken on trust as the job's
// end: acknowledged, a refused move would strand the game on the AI's
// turn.
func settled(err error) (outcome, error) {
	switch status.Code(err) {
	case codes.OK:
		return finished, nil
	case codes.Aborted:
		return lookAgain, nil
	case codes.FailedPrecondition, codes.InvalidArgument:
		return refusedHere, err
	case codes.PermissionDenied:
		// The job's credential is not this game's seat, and never will be.
		return finished, nil
	}
	return lookAgain, err
}

// move plays the AI's move in g, read by a call made at asked.
func (w *Worker) move(ctx context.Context, g *gamev1.Game, j aijobs.Job, last *chosen, asked time.Time) (outcome, error) {
	v, err := rulespb.Variant(g.GetKind())
	if err != nil {
		return finished, nil
	}
	moves := make([]rules.Move, 0, len(g.GetMoves()))
	for _, m := range g.GetMoves() {
		mv, err := rules.ParseMove(m.GetMove().GetCoordinate())
		if err != nil {
			return lookAgain, fmt.Errorf("game %s: stored move %q: %w", g.GetGameId(), m.GetMove().GetCoordinate(), err)
		}
		moves = append(moves, mv)
	}
	position := g.GetStart().GetFen() + "|" + fmt.Sprint(moves)
	mv := last.move
	if forced, ok := onlyMove(g); ok {
		// Nothing to think about: an engine given a movetime would spend
		// it all the same (UCI engines cut a forced move short only under
		// their own time management).
		mv = forced
	} else if last.position != position {
		start := time.Now()
		var nodes uint64
		var err error
		mv, nodes, err = w.Mover.Move(ctx, v, g.GetStart().GetFen(), moves, j.Level, seedOf(g.GetGameId(), len(moves)), thinkBudget(g, g.GetTurn(), start.Sub(asked)))
		if err != nil {
			if errors.Is(err, engine.ErrNoLegalMove) {
				return finished, nil
			}
			return lookAgain, err
		}
		*last = chosen{position: position, move: mv}
		if w.Metrics != nil {
			w.Metrics.Jobs.Add(ctx, 1)
			w.Metrics.Nodes.Add(ctx, int64(nodes))
			w.Metrics.Think.Record(ctx, time.Since(start).Seconds())
		}
	}
	_, err = w.Games.MakeMove(ctx, &gamev1.MakeMoveRequest{
		// Named by the version the move was chosen at, which no later
		// state of the game has: after an undo the same ply comes back,
		// and its old name would be answered as a retry of the undone move.
		GameId: g.GetGameId(), RequestId: fmt.Sprintf("ai-%s-v%d", g.GetGameId(), g.GetVersion()),
		ExpectedVersion: g.GetVersion(), Move: &commonv1.Move{Coordinate: mv.String()},
	})
	return settled(err)
}

// onlyMove is g's one legal move, when it has exactly one.
func onlyMove(g *gamev1.Game) (rules.Move, bool) {
	if len(g.GetLegalMoves()) != 1 {
		return rules.NoMove, false
	}
	mv, err := rules.ParseMove(g.GetLegalMoves()[0].GetCoordinate())
	return mv, err == nil
}

func (w *Worker) formation(ctx context.Context, g *gamev1.Game, j aijobs.Job, side rules.Side) (outcome, error) {
	var opponent *rules.Formation
	if side == rules.First {
		if f, err := rulespb.Formation(g.GetSecondFormation()); err == nil && g.GetSecondFormation() != 0 {
			opponent = &f
		}
	}
	f := engine.ChooseFormation(j.Level, seedOf(g.GetGameId(), -1), opponent)
	_, err := w.Games.ChooseFormation(ctx, &gamev1.ChooseFormationRequest{
		GameId: g.GetGameId(), RequestId: fmt.Sprintf("ai-%s-setup-%s", g.GetGameId(), side),
		ExpectedVersion: g.GetVersion(), Formation: rulespb.FormationPB(f),
	})
	return settled(err)
}
