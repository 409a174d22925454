// Package aijobs is the Redis queue of "AI to move" jobs: the game service
// adds one whenever an AI seat has to move or choose a formation, and any
// number of AI workers take them through a consumer group. Each worker
// holds a lease that it renews while it runs: a job whose worker dies
// stays pending and is claimed by another worker once the lease lapses,
// and a job that stays unfinished for a longer timeout (a worker that
// hangs but renews) is claimed too; the game service's request ids make
// the retried job commit at most one move. A job that cannot be read, or
// (with a MaxAttempts) that no worker finished in MaxAttempts deliveries,
// is moved to a dead-letter stream instead of circling for ever. Jobs older than MaxAge, whose
// credentials have expired, are trimmed as new ones come; workers leave
// the group when they stop, and Prune forgets those that never did.
//
// The queue has two lanes, each its own stream and consumer group: the
// jobs of games a person plays, and behind them the background jobs of
// games between two AI seats (tournament and test runs). A worker takes a
// background job only when no job of the first lane waits, so that a
// batch of AI-against-AI games never keeps a player waiting on the AI,
// whose clock runs meanwhile. The game service uses the background lane
// only while workers say they read it (ReadBothLanes), so that workers and
// game service may be upgraded, or rolled back, in any order.
package aijobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redisx"
	"github.com/palacehq/palace/pkg/rules"
)

// Kind says what the AI has to do.
type Kind string

const (
	KindMove      Kind = "move"
	KindFormation Kind = "formation"
)

// Job is one AI turn.
type Job struct {
	GameID string `json:"g"`
	// Version is the game's version once the AI is to act; a worker that
	// finds the game older waits, newer means the job is done or stale.
	Version uint64 `json:"v"`
	Kind    Kind   `json:"k"`
	// Side is "first" or "second"; Token is that seat's credential.
	Side       string `json:"s"`
	Token      string `json:"t"`
	Level      int    `json:"l"`
	EnqueuedMs int64  `json:"at"`
	// Background queues the job in the second lane: no person plays the
	// game, so it may wait while games that a person plays wait on the AI.
	Background bool `json:"bg,omitempty"`
	// Mark tells this job from another for the same version (a retried
	// command queues one of its own) in its unseen mark (MarkUnseen).
	Mark string `json:"m,omitempty"`
}

// lane is one of the queue's two streams.
type lane int

const (
	interactive lane = iota
	background
)

// lanes is every lane, in the order workers take their jobs.
var lanes = [...]lane{interactive, background}

func (l lane) String() string { return LaneName(l == background) }

// LaneName names a lane as logs, dead letters and metrics do: background
// or interactive.
func LaneName(background bool) string {
	if background {
		return "background"
	}
	return "interactive"
}

func laneOf(j Job) lane {
	if j.Background {
		return background
	}
	return interactive
}

// Delivery is a job handed to one worker.
type Delivery struct {
	ID  string
	Job Job
	// Attempt is how many times the job has been handed out, this time
	// included: 1 for a first delivery, more when claimed from a worker
	// that did not finish it.
	Attempt int64

	lane lane
}

// Background says whether the job came from the background lane.
func (d *Delivery) Background() bool { return d.lane == background }

// Queue is the job stream and its consumer group. All keys share the
// hash tag {ai}, so that a job moves to the dead-letter stream in one
// transaction, in a cluster too. A Queue is safe for concurrent use.
type Queue struct {
	rdb    redis.UniversalClient
	prefix string
	// key is the interactive lane's stream, under the name the queue had
	// before it had lanes, and bgKey the background lane's; one group of
	// the same name reads each.
	key   string
	bgKey string
	dead  string
	group string
	// ClaimAfter is how long a job may stay unacknowledged before another
	// worker takes it over, its worker's lease alive or not.
	ClaimAfter time.Duration
	// Lease is how long a worker counts as alive after it last renewed
	// its lease (KeepAlive). A job held that long by a worker whose lease
	// lapsed (killed, its machine lost) is taken over without waiting for
	// ClaimAfter: the AI's clock runs while nobody searches.
	Lease time.Duration
	// MaxAttempts is how many deliveries a job gets (0, New's: no limit).
	// One that is still pending after them (a position that crashes or
	// hangs every engine, say) is dead-lettered, so that it does not take
	// worker after worker with it for ever. A limit also gives up on the
	// jobs of an outage longer than MaxAttempts claim timeouts, whose
	// games then wait on the AI for good: hence none by default.
	MaxAttempts int64
	// MaxAge is how long a job can be acted on: the lifetime of its
	// credential, after which a worker drops it. Enqueue trims the jobs
	// older than that (0, New's: none), so that the stream stays bounded
	// when no worker takes its jobs, or none is deployed.
	MaxAge time.Duration
	// Replication makes Enqueue wait for replicas, so that a failover of
	// the queue's master cannot strand a game on the AI's turn.
	Replication redisx.Replication
	// Log hears of every dead-lettered job.
	Log *slog.Logger

	mu sync.Mutex
	// cursor is where the next scan of each lane for abandoned jobs
	// starts. Redis looks at only so many pending entries per XAUTOCLAIM;
	// restarting at the beginning every time, a worker would never see
	// past the first few if those are still being worked on.
	cursor [len(lanes)]string
	// orphansScanned is when this Queue last looked for the jobs of
	// workers whose lease lapsed: once per Lease/4 is enough, however many
	// workers share the Queue, unless the look found one. looking is
	// closed when the look in progress ends (nil: none is).
	orphansScanned time.Time
	looking        chan struct{}
	// lanesRead is what Enqueue last read of whether workers read both
	// lanes, at lanesReadAt; it reads again after lanesEvery.
	lanesRead   bool
	lanesReadAt time.Time
	lanesEvery  time.Duration
	// books keep, per consumer, what Strays needs.
	books map[string]*consumerBook
}

// consumerBook is what a Queue keeps of one consumer for Strays.
type consumerBook struct {
	// doubtful is set when the consumer may hold jobs it does not know of.
	doubtful bool
	// handedBack are the jobs it handed back: they stay pending with it,
	// looking idle, until a worker takes them, and are no strays.
	handedBack map[JobKey]handedJob
}

// handedJob is when a job was handed back, and the delivery count it was
// left with: a count grown since says a worker took it again, maybe this
// one in a look whose answer was lost.
type handedJob struct {
	at    time.Time
	count int64
}

// JobKey names a job by lane and id: the lanes' streams number their
// jobs alike, by the millisecond.
type JobKey struct {
	l  lane
	id string
}

// Key names d's job.
func (d *Delivery) Key() JobKey { return JobKey{d.lane, d.ID} }

// book is consumer's book; q.mu is held.
func (q *Queue) book(consumer string) *consumerBook {
	if q.books == nil {
		q.books = map[string]*consumerBook{}
	}
	b := q.books[consumer]
	if b == nil {
		b = &consumerBook{handedBack: map[JobKey]handedJob{}}
		q.books[consumer] = b
	}
	return b
}

// lanesTTL is how long the workers' word that they read both lanes
// stands unless renewed: once the last worker of this release stops,
// background jobs go back to the first lane, which workers of every
// release read.
const lanesTTL = 30 * time.Second

// deadMaxLen bounds the dead-letter stream, which nothing trims: it is
// kept for inspection, not replayed.
const deadMaxLen = 10000

// New returns the queue under prefix.
func New(rdb redis.UniversalClient, prefix string) *Queue {
	return &Queue{
		rdb: rdb, prefix: prefix, key: prefix + "{ai}:jobs", bgKey: prefix + "{ai}:jobs:background", dead: prefix + "{ai}:dead", group: "workers",
		ClaimAfter: 30 * time.Second, Lease: 3 * time.Second,
		Log: slog.New(slog.DiscardHandler), cursor: startCursors(),
		lanesEvery: 5 * time.Second,
	}
}

// startCursors starts every lane's scan at its beginning.
func startCursors() [len(lanes)]string { return [len(lanes)]string{"0-0", "0-0"} }

func (q *Queue) lanesKey() string { return q.prefix + "{ai}:lanes" }

// sayBothLanesRead is the write of ReadBothLanes, for c to send.
func (q *Queue) sayBothLanesRead(ctx context.Context, c redis.Cmdable) *redis.StatusCmd {
	return c.Set(ctx, q.lanesKey(), len(lanes), lanesTTL)
}

// ReadBothLanes records, for lanesTTL, that workers reading both lanes
// run. A worker process says so as it starts, and KeepAlive renews it.
func (q *Queue) ReadBothLanes(ctx context.Context) error {
	if err := q.sayBothLanesRead(ctx, q.rdb).Err(); err != nil {
		return fmt.Errorf("record that ai workers read both lanes: %w", err)
	}
	return nil
}

// bothLanesRead says whether workers that read the background lane run.
// A worker of an earlier release reads the first lane only: a background
// job queued where only such workers run would wait for ever.
func (q *Queue) bothLanesRead(ctx context.Context) bool {
	q.mu.Lock()
	if time.Since(q.lanesReadAt) < q.lanesEvery {
		defer q.mu.Unlock()
		return q.lanesRead
	}
	q.mu.Unlock()
	n, err := q.rdb.Exists(ctx, q.lanesKey()).Result()
	if err != nil {
		// The first lane is read by every worker; Enqueue's own write
		// will tell whether Redis answers.
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.lanesRead, q.lanesReadAt = n > 0, time.Now()
	return q.lanesRead
}

// stream is the key of l's stream.
func (q *Queue) stream(l lane) string {
	if l == background {
		return q.bgKey
	}
	return q.key
}

// Ensure creates the streams and groups if needed.
func (q *Queue) Ensure(ctx context.Context) error {
	for _, l := range lanes {
		err := q.rdb.XGroupCreateMkStream(ctx, q.stream(l), q.group, "0").Err()
		if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
			return fmt.Errorf("ai queue group of the %v lane: %w", l, err)
		}
	}
	return nil
}

// Enqueue adds a job; a background one goes to the first lane while no
// worker says it reads both.
func (q *Queue) Enqueue(ctx context.Context, j Job) error {
	b, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("encode ai job: %w", err)
	}
	l := laneOf(j)
	if l == background && !q.bothLanesRead(ctx) {
		l = interactive
	}
	key := q.stream(l)
	args := &redis.XAddArgs{Stream: key, Values: []any{"j", b}}
	if min := q.voidBefore(j); min != "" {
		// Approximate: Redis drops only whole nodes of the stream, which
		// is cheap; a few void jobs may stay until the next trim.
		args.MinID, args.Approx = min, true
	}
	err = q.Replication.Write(ctx, q.rdb, key, func(c redis.Cmdable) error {
		return c.XAdd(ctx, args).Err()
	})
	if err != nil {
		return fmt.Errorf("enqueue ai job for %s: %w", j.GameID, err)
	}
	return nil
}

// voidBefore is the stream id before which jobs are void once j is
// queued ("" with no MaxAge). Stream ids are Redis' times in ms, and j's
// EnqueuedMs is on the clock its credential's expiry was set by.
func (q *Queue) voidBefore(j Job) string {
	if q.MaxAge <= 0 {
		return ""
	}
	now := j.EnqueuedMs
	if now == 0 {
		now = time.Now().UnixMilli()
	}
	ms := now - q.MaxAge.Milliseconds()
	if ms <= 0 {
		return ""
	}
	return strconv.FormatInt(ms, 10)
}

// Next returns the next job for consumer: first one abandoned by another
// worker, else a new one, of the interactive lane, then likewise of the
// background lane, waiting up to block for a job of either. It returns
// nil, nil when nothing came, or only a job it dead-lettered.
func (q *Queue) Next(ctx context.Context, consumer string, block time.Duration) (*Delivery, error) {
	if block >= 0 {
		// Redis blocks whole milliseconds, and for ever on BLOCK 0.
		block = max(block, time.Millisecond)
	}
	d, err := q.next(ctx, consumer, block)
	q.taken(consumer, d, err)
	if err == nil || !redis.HasErrorPrefix(err, "NOGROUP") {
		return d, err
	}
	// The stream or its group is gone: Redis restarted without its data,
	// or someone deleted the key. Jobs queued since then wait in a stream
	// that Enqueue made again without the group; the group is made again
	// from the stream's start, so the workers take them instead of
	// failing until they are restarted.
	q.Log.WarnContext(ctx, "the ai queue's consumer group was gone: making it again", "stream", q.key, "background_stream", q.bgKey)
	if err := q.Ensure(ctx); err != nil {
		return nil, err
	}
	q.mu.Lock()
	q.cursor = startCursors()
	q.mu.Unlock()
	d, err = q.next(ctx, consumer, block)
	q.taken(consumer, d, err)
	return d, err
}

// strayScan bounds the jobs Strays lists in each lane: a worker holds one
// at a time, and a few it could not hand back.
const strayScan = 100

// taken books what a Next of consumer gave: d is its own again, not one
// it handed back; after an error it may hold jobs it does not know of.
func (q *Queue) taken(consumer string, d *Delivery, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.book(consumer)
	if d != nil {
		delete(b.handedBack, d.Key())
	}
	if err != nil {
		b.doubtful = true
	}
}

// doubt notes that consumer may hold jobs it does not know of.
func (q *Queue) doubt(consumer string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.book(consumer).doubtful = true
}

// handedBack books d as handed back by consumer, and forgets the jobs it
// handed back long enough ago that a worker has taken them, whoever it
// may be: a book that only grows would keep the ids of every job the
// consumer ever retried.
func (q *Queue) handedBack(consumer string, d *Delivery, count int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.book(consumer)
	now := time.Now()
	for k, h := range b.handedBack {
		if now.Sub(h.at) > 2*q.ClaimAfter {
			delete(b.handedBack, k)
		}
	}
	b.handedBack[d.Key()] = handedJob{at: now, count: count}
}

// Strays lists the jobs pending with consumer, in both lanes, but those
// it handed back, once a Next of its failed: such a failure may come
// after a job was taken (the reply of the read that took it lost, a job
// taken over whose count could not be read, one read beside another not
// given back), which stays pending with consumer, unknown to it, and
// waits out the claim timeout (the AI's clock running) unless handed
// back. A worker that holds no job in hand hands back those it does not
// know of, never tried (Postpone). Nil when no Next failed since the last
// list.
func (q *Queue) Strays(ctx context.Context, consumer string) ([]*Delivery, error) {
	q.mu.Lock()
	doubtful := q.book(consumer).doubtful
	q.mu.Unlock()
	if !doubtful {
		return nil, nil
	}
	var listed []*Delivery
	for _, l := range lanes {
		p, err := q.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: q.stream(l), Group: q.group, Start: "-", End: "+", Count: strayScan, Consumer: consumer}).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("ai jobs held by %s: %w", consumer, err)
		}
		for _, e := range p {
			listed = append(listed, &Delivery{ID: e.ID, Attempt: e.RetryCount, lane: l})
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.book(consumer)
	b.doubtful = false
	pending := map[JobKey]bool{}
	var out []*Delivery
	for _, d := range listed {
		k := d.Key()
		pending[k] = true
		if h, handed := b.handedBack[k]; !handed || h.count != d.Attempt {
			delete(b.handedBack, k)
			out = append(out, d)
		}
	}
	for k := range b.handedBack {
		if !pending[k] {
			delete(b.handedBack, k) // taken by another worker
		}
	}
	return out, nil
}

func (q *Queue) next(ctx context.Context, consumer string, block time.Duration) (*Delivery, error) {
	d, scanned, err := q.waiting(ctx, consumer)
	if err != nil || d != nil {
		return d, err
	}
	if !scanned {
		// Abandoned players' jobs may wait further on, ahead of every
		// background job: let the next call scan on at once.
		return nil, nil
	}
	d, err = q.read(ctx, consumer, block, lanes[:]...)
	if err != nil || d == nil || !d.Background() {
		return d, err
	}
	// A read that waited may wake to a background job alone though a
	// player's came in the same instant: Redis before 7.2 answers a
	// waiting read with the stream that woke it only.
	p, err := q.read(ctx, consumer, -1, interactive)
	if err != nil || p == nil {
		if err != nil {
			q.Log.WarnContext(ctx, "ai queue: looking for a player's job before a background one", "err", err)
		}
		return d, nil
	}
	gctx, cancel := taken(ctx)
	defer cancel()
	q.giveBack(gctx, consumer, d)
	return p, nil
}

// waiting takes, without waiting for one, a job of the interactive lane,
// abandoned by another worker or new, else likewise of the background
// lane. scanned is false when a scan for abandoned jobs stopped before
// the end of them; one of the interactive lane's stops it before the
// background lane.
func (q *Queue) waiting(ctx context.Context, consumer string) (d *Delivery, scanned bool, err error) {
	look := q.lookForOrphans(ctx)
	defer look.end()
	if d, err = q.claimOrphan(ctx, consumer, interactive, look); err != nil || d != nil {
		return d, true, err
	}
	if d, scanned, err = q.claim(ctx, consumer, interactive); err != nil || d != nil {
		return d, true, err
	}
	if d, err = q.read(ctx, consumer, -1, interactive); err != nil || d != nil {
		return d, true, err
	}
	if !scanned {
		return nil, false, nil
	}
	if d, err = q.claimOrphan(ctx, consumer, background, look); err != nil || d != nil {
		return d, true, err
	}
	return q.claim(ctx, consumer, background)
}

// claimCalls bounds the XAUTOCLAIM calls of one Next; each looks at up to
// ten pending entries.
const claimCalls = 16

// claim takes over one job of lane l left idle for ClaimAfter, scanning
// the pending entries from where the last scan stopped. scanned is false
// when it stopped before the end of them.
func (q *Queue) claim(ctx context.Context, consumer string, l lane) (d *Delivery, scanned bool, err error) {
	for range claimCalls {
		start := q.scanFrom(l)
		// Pending jobs trimmed from the stream (MaxAge) are not returned:
		// Redis 7 drops their pending entries, and the scan goes on.
		msgs, next, err := q.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: q.stream(l), Group: q.group, Consumer: consumer, MinIdle: q.ClaimAfter, Start: start, Count: 1,
		}).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, false, fmt.Errorf("claim ai job of the %v lane: %w", l, err)
		}
		q.scanOn(l, start, next)
		for _, m := range msgs {
			if d, err := q.claimed(ctx, l, m); err != nil || d != nil {
				return d, true, err
			}
		}
		if next == "" || next == "0-0" {
			return nil, true, nil
		}
	}
	return nil, false, nil
}

// aliveKey holds a worker's lease: it exists while the worker lives.
func (q *Queue) aliveKey(consumer string) string { return q.prefix + "{ai}:alive:" + consumer }

// KeepAlive renews consumer's lease for Lease, and the word that workers
// read both lanes. A worker calls it as it starts, before it takes a job,
// and then several times a Lease.
func (q *Queue) KeepAlive(ctx context.Context, consumer string) error {
	if q.Lease <= 0 {
		// No leases: a lease without an expiry would never lapse.
		return nil
	}
	pipe := q.rdb.Pipeline()
	pipe.Set(ctx, q.aliveKey(consumer), 1, q.Lease)
	q.sayBothLanesRead(ctx, pipe)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("renew ai worker lease of %s: %w", consumer, err)
	}
	return nil
}

// unseenKey marks a job whose commit a worker looked for and missed.
func (q *Queue) unseenKey(j Job) string {
	return q.prefix + "{ai}:unseen:" + j.GameID + ":" + strconv.FormatUint(j.Version, 10) + ":" + j.Mark
}

// unseenFor is how long a job's mark outlives its worker's last look: past
// the 2 minutes after which a worker gives the job up.
const unseenFor = 10 * time.Minute

// MarkUnseen records that a worker looked for the commit that queued j and
// did not find it, and puts the job back for a later look or gives it up:
// the game service, whose commit lands after that, queues the job again
// (TakeUnseen), so that the AI moves at once, not at the worker's next
// look.
func (q *Queue) MarkUnseen(ctx context.Context, j Job) error {
	if err := q.rdb.Set(ctx, q.unseenKey(j), 1, unseenFor).Err(); err != nil {
		return fmt.Errorf("mark the ai job of %s at version %d unseen: %w", j.GameID, j.Version, err)
	}
	return nil
}

// TakeUnseen reports, and forgets, whether a worker marked j unseen
// (MarkUnseen). A job no worker marked is being looked for or played:
// queued again, it would be searched twice at once. Only j's own mark
// counts: another job for the same version (a retry's) that a worker
// missed is not this one.
func (q *Queue) TakeUnseen(ctx context.Context, j Job) (bool, error) {
	n, err := q.rdb.Del(ctx, q.unseenKey(j)).Result()
	if err != nil {
		return false, fmt.Errorf("read the unseen mark of the ai job of %s at version %d: %w", j.GameID, j.Version, err)
	}
	return n == 1, nil
}

// Time reads Redis' clock, the one that dates jobs (Job.EnqueuedMs):
// a worker whose host's clock is set apart from it measures a job's age
// by it.
func (q *Queue) Time(ctx context.Context) (time.Time, error) {
	t, err := q.rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("read redis time: %w", err)
	}
	return t, nil
}

// orphanPage and orphanPages bound one scan for orphaned jobs: the jobs
// in progress it reads, a page at a time.
const (
	orphanPage  = 100
	orphanPages = 10
)

// orphanLook is one look of a Queue, in both lanes, for the jobs of
// workers whose lease lapsed.
type orphanLook struct {
	q     *Queue
	done  chan struct{}
	found bool
}

// lookForOrphans starts a look for the jobs of workers whose lease lapsed,
// or returns nil if none is due: when a look of this Queue that found
// nothing began in the last Lease/4. A look in progress is waited for,
// not skipped: should it find a job, a killed process's other workers may
// have left more, and the workers that came meanwhile look on, one after
// another, instead of waiting a whole read for new jobs while the AI's
// clock runs in those games.
func (q *Queue) lookForOrphans(ctx context.Context) *orphanLook {
	if q.Lease <= 0 {
		return nil
	}
	for {
		look, busy := q.startLook()
		if busy == nil {
			return look
		}
		select {
		case <-busy:
		case <-ctx.Done():
			return nil
		}
	}
}

// startLook starts a look if one is due and none is in progress; else it
// returns the end of the one in progress, if any.
func (q *Queue) startLook() (*orphanLook, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.looking != nil {
		return nil, q.looking
	}
	if time.Since(q.orphansScanned) < q.Lease/4 {
		return nil, nil
	}
	q.orphansScanned = time.Now()
	q.looking = make(chan struct{})
	return &orphanLook{q: q, done: q.looking}, nil
}

// end ends the look. One that found a job does not use up the interval:
// the next worker to come looks again.
func (l *orphanLook) end() {
	if l == nil {
		return
	}
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	if l.found {
		l.q.orphansScanned = time.Time{}
	}
	l.q.looking = nil
	close(l.done)
}

// claimOrphan takes over, during look (none if nil), one job of lane l
// held for at least Lease by a worker whose lease lapsed.
func (q *Queue) claimOrphan(ctx context.Context, consumer string, l lane, look *orphanLook) (*Delivery, error) {
	if look == nil {
		return nil, nil
	}
	start := "-"
	for range orphanPages {
		pending, err := q.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: q.stream(l), Group: q.group, Idle: q.Lease, Start: start, End: "+", Count: orphanPage,
		}).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("scan ai jobs in progress: %w", err)
		}
		alive, err := q.alive(ctx, pending, consumer)
		if err != nil {
			return nil, err
		}
		for _, p := range pending {
			if alive[p.Consumer] {
				continue
			}
			// MinIdle: a job another worker took over meanwhile looks
			// busy again, and stays with it.
			msgs, err := q.rdb.XClaim(ctx, &redis.XClaimArgs{
				Stream: q.stream(l), Group: q.group, Consumer: consumer, MinIdle: q.Lease, Messages: []string{p.ID},
			}).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, fmt.Errorf("claim ai job %s of the %v lane: %w", p.ID, l, err)
			}
			for _, m := range msgs {
				d, err := q.claimed(ctx, l, m)
				if err != nil || d != nil {
					if d != nil {
						look.found = true
						q.Log.InfoContext(ctx, "ai job taken over from a worker whose lease lapsed", "id", d.ID, "lane", l.String(), "game", d.Job.GameID, "worker", p.Consumer)
					}
					return d, err
				}
			}
		}
		if len(pending) < orphanPage {
			return nil, nil
		}
		start = "(" + pending[len(pending)-1].ID
	}
	return nil, nil
}

// alive says which holders of the pending jobs, but consumer itself, hold
// a lease.
func (q *Queue) alive(ctx context.Context, pending []redis.XPendingExt, consumer string) (map[string]bool, error) {
	alive := map[string]bool{consumer: true}
	cmds := map[string]*redis.IntCmd{}
	pipe := q.rdb.Pipeline()
	for _, p := range pending {
		if _, seen := alive[p.Consumer]; seen || cmds[p.Consumer] != nil {
			continue
		}
		cmds[p.Consumer] = pipe.Exists(ctx, q.aliveKey(p.Consumer))
	}
	if len(cmds) == 0 {
		return alive, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("ai worker leases: %w", err)
	}
	for c, cmd := range cmds {
		alive[c] = cmd.Val() > 0
	}
	return alive, nil
}

func (q *Queue) scanFrom(l lane) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.cursor[l]
}

// scanOn moves the cursor from start to next, unless another scan of
// this Queue moved it meanwhile: either way some scan goes on, and an
// entry it skips is found on the next pass.
func (q *Queue) scanOn(l lane, start, next string) {
	if next == "" {
		next = "0-0"
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cursor[l] == start {
		q.cursor[l] = next
	}
}

// claimed vets a job just taken over: it is handed out only if it can be
// read and has deliveries left. One whose count could not be read stays
// the consumer's, a stray (Strays).
func (q *Queue) claimed(ctx context.Context, l lane, m redis.XMessage) (*Delivery, error) {
	ctx, cancel := taken(ctx)
	defer cancel()
	n, err := q.deliveries(ctx, l, m.ID)
	if err != nil || n == 0 {
		// n == 0: its first worker finished it after all.
		return nil, err
	}
	return q.vet(ctx, l, m, n)
}

// takenTimeout bounds the steps that follow a job's taking (taken).
const takenTimeout = 5 * time.Second

// taken is ctx for the steps that follow a job's taking (vetting it,
// giving back one read beside it), which a caller stopping meanwhile
// does not cut short: the job is the consumer's already, and is to reach
// the caller, who hands it back as it stops, or be given back.
func taken(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), takenTimeout)
}

// deliveries is how many times the pending job id of lane l has been
// handed out; 0 if it is not pending any more.
func (q *Queue) deliveries(ctx context.Context, l lane, id string) (int64, error) {
	p, err := q.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: q.stream(l), Group: q.group, Start: id, End: id, Count: 1}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("deliveries of ai job %s: %w", id, err)
	}
	if len(p) == 0 {
		return 0, nil
	}
	return p[0].RetryCount, nil
}

// read waits up to block (not at all if negative) for a new job of the
// lanes ls, given in the order they come first.
func (q *Queue) read(ctx context.Context, consumer string, block time.Duration, ls ...lane) (*Delivery, error) {
	streams := make([]string, 0, 2*len(ls))
	for _, l := range ls {
		streams = append(streams, q.stream(l))
	}
	for range ls {
		streams = append(streams, ">")
	}
	got, err := q.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: q.group, Consumer: consumer, Streams: streams, Count: 1, Block: block,
	}).Result()
	if errors.Is(err, redis.Nil) || (err != nil && ctx.Err() != nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ai job: %w", err)
	}
	ctx, cancel := taken(ctx)
	defer cancel()
	var first *Delivery
	for _, l := range ls {
		for _, s := range got {
			if s.Stream != q.stream(l) {
				continue
			}
			for _, m := range s.Messages {
				if first != nil || err != nil {
					// A read that waited wakes to every lane that has a job
					// by then: the later lane's job goes to the next worker
					// to look, as if it had never been handed out.
					q.giveBack(ctx, consumer, &Delivery{ID: m.ID, Attempt: 1, lane: l})
					continue
				}
				first, err = q.vet(ctx, l, m, 1)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return first, nil
}

// giveBack hands back d, read by consumer beside the job handed out, and
// never started; should that fail, d is a stray (Strays).
func (q *Queue) giveBack(ctx context.Context, consumer string, d *Delivery) {
	if err := q.handBack(ctx, consumer, d, q.ClaimAfter, true); err != nil {
		q.Log.WarnContext(ctx, "ai job read beside another not handed back", "id", d.ID, "lane", d.lane.String(), "err", err)
		q.doubt(consumer)
	}
}

// vet returns the delivery of m, handed out for the attempt-th time, or
// dead-letters it (and returns nil, nil) if it cannot be read or has had
// its MaxAttempts.
func (q *Queue) vet(ctx context.Context, l lane, m redis.XMessage, attempt int64) (*Delivery, error) {
	d, err := decode(m)
	if err != nil {
		return nil, q.bury(ctx, l, m, err.Error())
	}
	if q.MaxAttempts > 0 && attempt > q.MaxAttempts {
		return nil, q.bury(ctx, l, m, fmt.Sprintf("still pending after %d deliveries", attempt-1))
	}
	d.Attempt = attempt
	d.lane = l
	return d, nil
}

// bury moves m to the dead-letter stream: kept there for a look, it is
// never handed out again.
func (q *Queue) bury(ctx context.Context, l lane, m redis.XMessage, reason string) error {
	raw, _ := m.Values["j"].(string)
	pipe := q.rdb.TxPipeline()
	pipe.XAdd(ctx, &redis.XAddArgs{
		Stream: q.dead, MaxLen: deadMaxLen, Approx: true,
		Values: []any{"j", raw, "id", m.ID, "reason", reason, "lane", l.String()},
	})
	pipe.XAck(ctx, q.stream(l), q.group, m.ID)
	pipe.XDel(ctx, q.stream(l), m.ID)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("dead-letter ai job %s: %w", m.ID, err)
	}
	q.Log.WarnContext(ctx, "ai job dead-lettered", "id", m.ID, "lane", l.String(), "reason", reason, "stream", q.dead)
	return nil
}

func decode(m redis.XMessage) (*Delivery, error) {
	raw, _ := m.Values["j"].(string)
	var j Job
	if err := json.Unmarshal([]byte(raw), &j); err != nil {
		return nil, fmt.Errorf("decode ai job %s: %w", m.ID, err)
	}
	// No worker could play a side it cannot read: such a job is dead at
	// once, not handed out until its attempts run out (without a limit,
	// for ever).
	if _, err := rules.ParseSide(j.Side); err != nil {
		return nil, fmt.Errorf("decode ai job %s: %w", m.ID, err)
	}
	return &Delivery{ID: m.ID, Job: j}, nil
}

// Bury dead-letters a job that no worker could ever play (its credential
// or game id refused for what it is), with why: left pending, it would be
// handed out again after every claim timeout, for ever.
func (q *Queue) Bury(ctx context.Context, d *Delivery, reason string) error {
	raw, err := json.Marshal(d.Job)
	if err != nil {
		return fmt.Errorf("encode ai job %s: %w", d.ID, err)
	}
	return q.bury(ctx, d.lane, redis.XMessage{ID: d.ID, Values: map[string]any{"j": string(raw)}}, reason)
}

// Done acknowledges and deletes a job.
func (q *Queue) Done(ctx context.Context, d *Delivery) error {
	pipe := q.rdb.TxPipeline()
	pipe.XAck(ctx, q.stream(d.lane), q.group, d.ID)
	pipe.XDel(ctx, q.stream(d.lane), d.ID)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("ack ai job %s: %w", d.ID, err)
	}
	return nil
}

// handBackScript makes job ARGV[3], if consumer ARGV[2] of group ARGV[1]
// still holds it, look idle for ARGV[4] ms, and returns, if it did, the
// count it left the job with plus one (0 if it did not). Its
// delivery count is kept, the job not tried again: given explicitly, since
// JUSTID leaves it alone in Redis but the in-process Redis of make run
// raises it, and counted every try twice. With ARGV[5] = 1 the job was
// never started, and the delivery that gave it to the consumer does not
// count, the tries before it (a job taken over) still do: its count goes
// back to ARGV[6], the delivery's attempt less one.
var handBackScript = redis.NewScript(`
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1, ARGV[2])
if #p == 0 then
  return 0
end
local count = p[1][4]
if ARGV[5] == '1' then
  count = ARGV[6]
end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'IDLE', ARGV[4], 'RETRYCOUNT', count, 'JUSTID')
return tonumber(count) + 1`)

// HandBack gives a job that consumer holds but cannot finish (its worker
// is stopping) to the other workers now: the job stays pending, looking
// idle for ClaimAfter already, so the next worker to scan takes it over
// instead of the AI's move waiting out the claim timeout. A job that
// another worker took over meanwhile is left to it.
func (q *Queue) HandBack(ctx context.Context, consumer string, d *Delivery) error {
	return q.handBack(ctx, consumer, d, q.ClaimAfter, false)
}

// Postpone hands back a job that could not be tried yet (the commit that
// queued it has not shown), to be taken again after after by the next
// worker to scan: its delivery is not counted (MaxAttempts), since nothing
// was tried.
func (q *Queue) Postpone(ctx context.Context, consumer string, d *Delivery, after time.Duration) error {
	return q.handBack(ctx, consumer, d, max(q.ClaimAfter-after, 0), true)
}

// Retry hands back a job whose try failed for a reason that may pass (an
// engine that crashed, an error of the game service), to be taken again
// after after by the next worker to scan, consumer included: the job stays
// pending, looking idle for ClaimAfter less after. Left as it is, it would
// wait out the claim timeout under a live worker while the AI's clock
// runs. The next delivery counts as another (MaxAttempts).
func (q *Queue) Retry(ctx context.Context, consumer string, d *Delivery, after time.Duration) error {
	return q.handBack(ctx, consumer, d, max(q.ClaimAfter-after, 0), false)
}

func (q *Queue) handBack(ctx context.Context, consumer string, d *Delivery, idle time.Duration, untried bool) error {
	flag := "0"
	if untried {
		flag = "1"
	}
	// Set from the delivery, not taken off the count in Redis, so that a
	// hand back made again (its answer lost) takes off no earlier try.
	before := max(d.Attempt-1, 0)
	n, err := handBackScript.Run(ctx, q.rdb, []string{q.stream(d.lane)}, q.group, consumer, d.ID, idle.Milliseconds(), flag, before).Int64()
	if err != nil {
		return fmt.Errorf("hand back ai job %s: %w", d.ID, err)
	}
	if n > 0 {
		q.handedBack(consumer, d, n-1)
	}
	return nil
}

// leaveScript ends the lease KEYS[1] of consumer ARGV[2] of group
// ARGV[1] of the streams KEYS[2...] and deletes the consumer from each
// unless it holds a job in one, and returns 1 if it is gone. Check and
// delete are one step: DELCONSUMER drops the pending entries of the jobs
// a consumer holds, and a job no longer pending is never claimed by
// another worker.
var leaveScript = redis.NewScript(`
redis.call('DEL', KEYS[1])
for i = 2, #KEYS do
  if #redis.call('XPENDING', KEYS[i], ARGV[1], '-', '+', 1, ARGV[2]) > 0 then
    return 0
  end
end
for i = 2, #KEYS do
  redis.call('XGROUP', 'DELCONSUMER', KEYS[i], ARGV[1], ARGV[2])
end
return 1`)

// pruneScript deletes the consumers of group ARGV[1] of stream KEYS[1]
// idle for ARGV[2] ms or more that hold no job, and returns how many.
var pruneScript = redis.NewScript(`
local n = 0
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local f = {}
  for i = 1, #c, 2 do f[c[i]] = c[i + 1] end
  if f['pending'] == 0 and f['idle'] >= tonumber(ARGV[2]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], f['name'])
    n = n + 1
  end
end
return n`)

// Leave ends consumer's lease and deletes it from the group unless it
// holds a job, and says whether it is gone. Every worker that ever ran
// stays listed in the group until it is deleted; one that stops holding a
// job must stay, so that the job's pending entry is kept for another
// worker to claim.
func (q *Queue) Leave(ctx context.Context, consumer string) (bool, error) {
	n, err := leaveScript.Run(ctx, q.rdb, []string{q.aliveKey(consumer), q.key, q.bgKey}, q.group, consumer).Int()
	if err != nil {
		return false, fmt.Errorf("leave ai queue as %s: %w", consumer, err)
	}
	return n == 1, nil
}

// Prune deletes the consumers idle for idle or longer that hold no job:
// those of workers that died, or stopped holding a job since claimed by
// another, and never left. It returns how many it deleted.
func (q *Queue) Prune(ctx context.Context, idle time.Duration) (int64, error) {
	var all int64
	for _, l := range lanes {
		n, err := pruneScript.Run(ctx, q.rdb, []string{q.stream(l)}, q.group, idle.Milliseconds()).Int64()
		if err != nil {
			return all, fmt.Errorf("prune ai queue consumers of the %v lane: %w", l, err)
		}
		all += n
	}
	return all, nil
}

// Depth counts the jobs waiting or in progress, in both lanes.
func (q *Queue) Depth(ctx context.Context) (int64, error) {
	d, err := q.Depths(ctx)
	return d.Interactive + d.Background, err
}

// Depths are the numbers of jobs waiting or in progress in each lane.
type Depths struct{ Interactive, Background int64 }

// Depths counts the jobs waiting or in progress, lane by lane.
func (q *Queue) Depths(ctx context.Context) (Depths, error) {
	pipe := q.rdb.Pipeline()
	i, b := pipe.XLen(ctx, q.key), pipe.XLen(ctx, q.bgKey)
	if _, err := pipe.Exec(ctx); err != nil {
		return Depths{}, fmt.Errorf("ai queue depth: %w", err)
	}
	return Depths{Interactive: i.Val(), Background: b.Val()}, nil
}

// Dead counts the dead-lettered jobs kept (at most about 10,000).
func (q *Queue) Dead(ctx context.Context) (int64, error) {
	n, err := q.rdb.XLen(ctx, q.dead).Result()
	if err != nil {
		return 0, fmt.Errorf("ai dead-letter depth: %w", err)
	}
	return n, nil
}
