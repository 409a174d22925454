// Package sweep finds expired deadlines in the game service's deadline
// index and hands them to the game service, which checks each one against
// the game's state and ends the game on time, announces a byo-yomi
// milestone, applies a default formation or aborts the game.
//
// The index has a fixed number of shards. Each shard is swept by the one
// replica holding its lease in Redis: a key with a TTL that the holder
// renews every tick. Replicas heartbeat into a shared set and aim for a
// fair share (ceil(shards/replicas)); free shards are taken at once, and
// a replica holding more than its share gives the surplus up only while
// another live replica has less. When a replica dies its leases expire
// within the TTL and the others take the shards over, so a kill delays
// timeouts by at most about TTL + tick.
//
// Sweeping a shard twice (two replicas during a hand-over, or a replica
// that lost its lease without knowing yet) is harmless: the game service
// commits with compare-and-set and changes a game only for its current
// deadline, so a deadline is applied exactly once.
package sweep

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"

	"github.com/palacehq/palace/pkg/deadline"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// Expirer is the part of the game service a sweeper needs.
type Expirer interface {
	ExpireDeadline(ctx context.Context, in *gamev1.ExpireDeadlineRequest, opts ...grpc.CallOption) (*gamev1.ExpireDeadlineResponse, error)
}

var _ Expirer = gamev1.GameServiceClient(nil)

// Config tunes the sweepers; zero fields take the defaults of the
// constants below.
type Config struct {
	// ReplicaID names this replica in leases; empty: host-pid-random.
	ReplicaID string
	// LeaseTTL is how long a lease outlives its holder's last renewal:
	// the longest a dead replica's shards stay unswept.
	LeaseTTL time.Duration
	// Tick is how often leases are renewed and free shards looked for.
	Tick time.Duration
	// Poll is the longest a sweeper sleeps: an entry added earlier than
	// the earliest one it knew is seen within Poll.
	Poll time.Duration
	// Batch is how many due entries of one shard are handed to the game
	// service at once (the calls themselves are bounded by Workers).
	Batch int
	// Workers bounds the concurrent ExpireDeadline calls of the replica.
	Workers int
	// CallTimeout bounds one ExpireDeadline call.
	CallTimeout time.Duration
	// StaleAfter is how long after its instant an entry that is not its
	// game's current deadline is kept and re-checked before it is
	// removed: a commit that makes it current may still be on its way.
	StaleAfter time.Duration
	// HandOverAfter is how long every call to the game service may fail,
	// or go unanswered, before this replica hands its shards to the others
	// (see reach.go).
	HandOverAfter time.Duration
	// OnReach, when set, is told when the replica hands its shards over
	// for want of the game service (false) and when it answers again
	// (true).
	OnReach func(reachable bool)
	// OnIndex, when set, is told when the game service is found to write
	// another deadline index than this replica sweeps (false), and when it
	// writes this one again (true); see index.go.
	OnIndex func(agrees bool)
}

// Defaults.
const (
	DefaultLeaseTTL    = 500 * time.Millisecond
	DefaultTick        = 100 * time.Millisecond
	DefaultPoll        = 20 * time.Millisecond
	DefaultBatch       = 64
	DefaultWorkers     = 32
	DefaultCallTimeout = 5 * time.Second
	DefaultStaleAfter  = 10 * time.Second
	// DefaultHandOverAfter is about three retries of an entry.
	DefaultHandOverAfter = 3 * time.Second
)

func (c Config) withDefaults() Config {
	if c.ReplicaID == "" {
		c.ReplicaID = NewReplicaID()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.LeaseTTL, DefaultLeaseTTL)
	def(&c.Tick, DefaultTick)
	def(&c.Poll, DefaultPoll)
	def(&c.CallTimeout, DefaultCallTimeout)
	def(&c.StaleAfter, DefaultStaleAfter)
	def(&c.HandOverAfter, DefaultHandOverAfter)
	if c.Batch <= 0 {
		c.Batch = DefaultBatch
	}
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	return c
}

// MaxBatch and MaxWorkers bound Config's Batch and Workers.
const (
	MaxBatch   = 10000
	MaxWorkers = 1024
)

// Validate reports every problem at once.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.LeaseTTL < 3*c.Tick {
		errs = append(errs, fmt.Errorf("lease TTL %v must be at least 3 ticks (%v): a lease must survive a late renewal", c.LeaseTTL, 3*c.Tick))
	}
	if c.Batch > MaxBatch {
		errs = append(errs, fmt.Errorf("batch %d: want 1..%d", c.Batch, MaxBatch))
	}
	if c.Workers > MaxWorkers {
		errs = append(errs, fmt.Errorf("workers %d: want 1..%d", c.Workers, MaxWorkers))
	}
	return errors.Join(errs...)
}

// aliveWindow is how recent a heartbeat must be for its replica to count.
// It is shorter than the lease TTL: by the time a dead replica's leases
// expire it no longer counts, so the survivors take all of its shards.
func (c Config) aliveWindow() time.Duration { return max(c.LeaseTTL-2*c.Tick, 2*c.Tick) }

// handOff is how long a released shard is still swept here, so that no
// deadline waits while the replica taking it over has not ticked yet.
func (c Config) handOff() time.Duration { return 2 * c.Tick }

// NewReplicaID is unique per process start: a restarted replica must not
// inherit the leases of its former self without renewing them.
func NewReplicaID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "clock"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// Service runs the sweepers of one replica.
type Service struct {
	log   *slog.Logger
	rdb   redis.UniversalClient
	idx   *deadline.Index
	games Expirer
	cfg   Config
	keys  keys
	m     metrics
	late  *histogram
	// sem bounds the ExpireDeadline calls in flight across all shards.
	sem    chan struct{}
	health []health

	// calls counts the ExpireDeadline calls in flight, so that Run
	// returns only when none is left.
	calls sync.WaitGroup
	// wake tells the scanner to read again now (a shard was taken, a
	// retry scheduled, capacity freed).
	wake chan struct{}

	mu       sync.Mutex
	owned    map[int]*shardRun // leases held and renewed
	leaving  map[int]*shardRun // released, swept until the hand-off ends
	sweeping map[int]*shard    // owned and leaving shards
	// replicas is the last replica set read, at readAt (local); counted
	// the replicas the last tick counted live, this one included.
	replicas []string
	readAt   time.Time
	counted  []string

	reach reach
	// reachReports keeps the reports of reach in the order they are made.
	reachReports sync.Mutex
}

type shardRun struct {
	renewed time.Time // last successful renewal or acquisition (local)
	stopAt  time.Time // for a leaving shard
}

// New returns a service; Run starts it.
func New(log *slog.Logger, rdb redis.UniversalClient, idx *deadline.Index, games Expirer, meter metric.Meter, cfg Config) (*Service, error) {
	if rdb == nil {
		return nil, errors.New("sweep: a Redis client is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Service{
		log: log.With("replica", cfg.ReplicaID), rdb: rdb, idx: idx, games: games, cfg: cfg,
		keys:   keys{prefix: idx.Prefix()},
		late:   newHistogram(),
		sem:    make(chan struct{}, cfg.Workers),
		health: make([]health, idx.Shards()),
		owned:  map[int]*shardRun{}, leaving: map[int]*shardRun{}, sweeping: map[int]*shard{},
		wake: make(chan struct{}, 1),
	}
	m, err := newMetrics(meter, s)
	if err != nil {
		return nil, err
	}
	s.m = m
	return s, nil
}

// ReplicaID is this replica's id.
func (s *Service) ReplicaID() string { return s.cfg.ReplicaID }

// Owned lists the shards whose lease this replica holds.
func (s *Service) Owned() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int, 0, len(s.owned))
	for sh := range s.owned {
		out = append(out, sh)
	}
	slices.Sort(out)
	return out
}

// Run holds leases and sweeps until ctx ends. It releases nothing: a
// cancelled Run behaves like a dead replica (the leases expire) unless
// Release is called afterwards, as a clean shutdown does.
func (s *Service) Run(ctx context.Context) error {
	scanned, checked := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(scanned)
		s.scan(ctx)
	}()
	go func() {
		defer close(checked)
		s.checkIndex(ctx)
	}()
	defer func() {
		<-scanned
		<-checked
		s.calls.Wait()
	}()
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	for {
		s.tick(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Release gives up every lease and leaves the replica set, so the other
// replicas take the shards over at their next tick instead of after the
// TTL. Call it after Run returned.
func (s *Service) Release(ctx context.Context) error {
	n, err := s.dropShards(ctx)
	if err != nil {
		return err
	}
	s.log.Info("released shard leases", "shards", n)
	return nil
}

// dropShards stops sweeping, gives up every lease and leaves the replica
// set; it returns how many shards it gave up.
func (s *Service) dropShards(ctx context.Context) (int, error) {
	s.mu.Lock()
	shards := make([]int, 0, len(s.owned)+len(s.leaving))
	for sh := range s.owned {
		shards = append(shards, sh)
	}
	for sh := range s.leaving {
		shards = append(shards, sh)
	}
	s.owned, s.leaving, s.sweeping = map[int]*shardRun{}, map[int]*shardRun{}, map[int]*shard{}
	s.mu.Unlock()
	pipe := s.rdb.Pipeline()
	for _, sh := range shards {
		releaseScript.Eval(ctx, pipe, []string{s.keys.lease(sh)}, s.cfg.ReplicaID)
	}
	pipe.ZRem(ctx, s.keys.replicas(), s.cfg.ReplicaID)
	if _, err := pipe.Exec(ctx); err != nil {
		return len(shards), fmt.Errorf("release clock leases: %w", err)
	}
	return len(shards), nil
}

// Close unregisters the metric callbacks.
func (s *Service) Close() error { return s.m.close() }

// tick renews this replica's leases, counts the live replicas, and takes
// or gives up shards towards a fair share.
func (s *Service) tick(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	now := time.Now()
	tctx, cancel := context.WithTimeout(ctx, s.cfg.LeaseTTL)
	defer cancel()
	if s.handingOver(ctx, tctx, now) {
		return
	}
	s.mu.Lock()
	mine := make([]int, 0, len(s.owned))
	for sh := range s.owned {
		mine = append(mine, sh)
	}
	for sh, r := range s.leaving {
		if now.After(r.stopAt) {
			delete(s.leaving, sh)
			delete(s.sweeping, sh)
		}
	}
	s.mu.Unlock()

	shards := s.idx.Shards()
	ttl := s.cfg.LeaseTTL.Milliseconds()
	pipe := s.rdb.Pipeline()
	hb := heartbeatScript.Eval(tctx, pipe, []string{s.keys.replicas()}, s.cfg.ReplicaID, s.cfg.aliveWindow().Milliseconds(), time.Minute.Milliseconds())
	renewed := queueRenewals(tctx, pipe, s.rdb, s.keys, mine, s.cfg.ReplicaID, ttl)
	cards := make(map[int]*redis.IntCmd, len(mine))
	for _, sh := range mine {
		cards[sh] = pipe.ZCard(tctx, s.idx.Key(sh))
	}
	holders := make([]*redis.StringCmd, shards)
	for sh := range shards {
		holders[sh] = pipe.Get(tctx, s.keys.lease(sh))
	}
	_, _ = pipe.Exec(tctx) // each command's error is looked at below

	// Renewals first: a lease we failed to renew for a whole TTL may be
	// someone else's by now.
	// A starved or cut-off replica loses its leases together: one line
	// names them all, where a line each buried the log.
	var lost, late []int
	var lateErr error
	s.mu.Lock()
	for i, sh := range mine {
		r, ok := s.owned[sh]
		if !ok {
			continue
		}
		n, err := renewed(i)
		switch {
		case err == nil && n == 1:
			r.renewed = now
		case err == nil:
			lost = append(lost, sh)
			s.stopLocked(sh)
		case now.Sub(r.renewed) >= s.cfg.LeaseTTL:
			late, lateErr = append(late, sh), err
			s.stopLocked(sh)
		}
		if n, err := cards[sh].Result(); err == nil {
			s.health[sh].pending.Store(n)
		}
	}
	s.mu.Unlock()
	if len(lost) > 0 {
		s.log.Warn("lost the leases of shards", "shards", lost)
	}
	if len(late) > 0 {
		s.log.Warn("could not renew the leases of shards in time", "shards", late, "err", lateErr)
	}

	live, readErr := hb.StringSlice()
	stale := false
	if readErr != nil {
		// The replica set is one key, on one Redis Cluster node: that node
		// being down must not keep this replica from taking the free
		// shards on the others (a dead replica's, or its own lost ones).
		// The last set read stands in for it.
		if ctx.Err() == nil { // not the replica stopping
			s.log.Warn("clock heartbeat", "err", readErr)
		}
		s.mu.Lock()
		live, stale = slices.Clone(s.replicas), now.Sub(s.readAt) > s.cfg.aliveWindow()
		s.mu.Unlock()
	}
	if !slices.Contains(live, s.cfg.ReplicaID) {
		live = append(live, s.cfg.ReplicaID)
	}
	slices.Sort(live)
	held := map[string]int{}
	var free, adopt []int
	s.mu.Lock()
	for sh, c := range holders {
		id, err := c.Result()
		switch {
		case errors.Is(err, redis.Nil):
			free = append(free, sh)
		case err != nil:
			// Unknown: neither count it nor try to take it.
		default:
			held[id]++
			if _, ok := s.owned[sh]; id == s.cfg.ReplicaID && !ok {
				// Still ours although a renewal failed for a whole TTL
				// (Redis was slow): sweep it again rather than leave it
				// unswept until it expires.
				adopt = append(adopt, sh)
			}
		}
	}
	s.mu.Unlock()
	if len(adopt) > 0 {
		s.adopt(adopt, now)
	}
	if stale {
		// A replica the last set read named, longer ago than a heartbeat
		// counts, is taken for live only while it holds a lease (one just
		// started holds none yet, and counts while the read is recent):
		// one that died since holds none once its leases run out, and
		// counted live and short of its share, it would keep this replica
		// from taking its shards, their games never flagged.
		live = slices.DeleteFunc(live, func(id string) bool { return id != s.cfg.ReplicaID && held[id] == 0 })
	}
	fair := int(math.Ceil(float64(shards) / float64(len(live))))
	hungry := false
	for _, id := range live {
		// Below the floor of the share, so that a share that does not
		// divide evenly (16 over 3: 6, 6, 4) does not move shards forever.
		if id != s.cfg.ReplicaID && held[id] < shards/len(live) {
			hungry = true
		}
	}
	s.mu.Lock()
	if readErr == nil {
		s.replicas, s.readAt = live, now
	}
	s.counted = live
	have := len(s.owned)
	s.mu.Unlock()

	// Free shards are taken at once (a dead replica's shards must not
	// wait), up to the fair share while another replica still needs some.
	want := len(free)
	if hungry {
		want = min(want, max(0, fair-have))
	}
	if want > 0 {
		mrand.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
		s.acquire(tctx, free[:want], now)
	}
	if hungry && have > fair {
		s.release(tctx, have-fair, now)
	}
}

// adopt sweeps shards whose lease Redis shows as this replica's.
func (s *Service) adopt(shards []int, now time.Time) {
	s.mu.Lock()
	for _, sh := range shards {
		if _, ok := s.owned[sh]; ok {
			continue
		}
		s.log.Info("resumed a shard whose lease is still ours", "shard", sh)
		delete(s.leaving, sh)
		s.owned[sh] = &shardRun{renewed: now}
		if s.sweeping[sh] == nil {
			s.sweeping[sh] = newShard(sh, s.idx.Key(sh))
		}
	}
	s.mu.Unlock()
	s.wakeScanner()
}

// acquire tries to take the given free shards.
func (s *Service) acquire(tctx context.Context, cand []int, now time.Time) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.BoolCmd, len(cand))
	for i, sh := range cand {
		cmds[i] = pipe.SetNX(tctx, s.keys.lease(sh), s.cfg.ReplicaID, s.cfg.LeaseTTL)
	}
	_, _ = pipe.Exec(tctx)
	var took []int
	defer func() {
		if len(took) > 0 {
			s.wakeScanner()
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, sh := range cand {
		if ok, err := cmds[i].Result(); err != nil || !ok {
			continue
		}
		if r, ok := s.leaving[sh]; ok {
			// Taken back during its hand-off: the sweeper still runs.
			delete(s.leaving, sh)
			r.renewed = now
			s.owned[sh] = r
			continue
		}
		s.owned[sh] = &shardRun{renewed: now}
		s.sweeping[sh] = newShard(sh, s.idx.Key(sh))
		took = append(took, sh)
	}
	if len(took) > 0 {
		s.log.Info("took the leases of shards", "shards", took)
	}
}

// release gives up n shards for a replica that has fewer than its share.
// Their sweepers keep running for the hand-off.
func (s *Service) release(tctx context.Context, n int, now time.Time) {
	s.mu.Lock()
	mine := make([]int, 0, len(s.owned))
	for sh := range s.owned {
		mine = append(mine, sh)
	}
	s.mu.Unlock()
	mrand.Shuffle(len(mine), func(i, j int) { mine[i], mine[j] = mine[j], mine[i] })
	mine = mine[:min(n, len(mine))]
	pipe := s.rdb.Pipeline()
	for _, sh := range mine {
		releaseScript.Eval(tctx, pipe, []string{s.keys.lease(sh)}, s.cfg.ReplicaID)
	}
	if _, err := pipe.Exec(tctx); err != nil {
		// Leases not released expire or stay ours; nothing is lost.
		s.log.Warn("release surplus shards", "err", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sh := range mine {
		if r, ok := s.owned[sh]; ok {
			delete(s.owned, sh)
			r.stopAt = now.Add(s.cfg.handOff())
			s.leaving[sh] = r
			s.log.Info("released a shard to a replica with fewer", "shard", sh)
		}
	}
}

func (s *Service) stopLocked(sh int) {
	delete(s.owned, sh)
	delete(s.sweeping, sh)
}

// Stats reads every shard's pending count and owner, with this replica's
// sweepers.
func (s *Service) Stats(ctx context.Context) (Stats, error) {
	n := s.idx.Shards()
	pipe := s.rdb.Pipeline()
	cards := make([]*redis.IntCmd, n)
	owners := make([]*redis.StringCmd, n)
	for sh := range n {
		cards[sh] = pipe.ZCard(ctx, s.idx.Key(sh))
		owners[sh] = pipe.Get(ctx, s.keys.lease(sh))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Stats{}, fmt.Errorf("read deadline index stats: %w", err)
	}
	s.mu.Lock()
	out := Stats{ReplicaID: s.cfg.ReplicaID, Replicas: slices.Clone(s.counted), Lateness: s.late.buckets()}
	owned := make(map[int]bool, len(s.owned))
	for sh := range s.owned {
		owned[sh] = true
	}
	s.mu.Unlock()
	for sh := range n {
		owner, _ := owners[sh].Result()
		out.Shards = append(out.Shards, ShardStats{Shard: sh, Pending: cards[sh].Val(), Owner: owner})
		h := &s.health[sh]
		last := h.lastSweepMs.Load()
		if !owned[sh] && last == 0 {
			continue
		}
		sw := SweeperStats{Shard: sh, Expired: h.expired.Load(), Errors: h.errors.Load(), Stale: h.stale.Load(), Owned: owned[sh]}
		if last != 0 {
			sw.LastSweep = time.UnixMilli(last)
		}
		out.Sweepers = append(out.Sweepers, sw)
	}
	return out, nil
}

type metrics struct {
	lateness metric.Float64Histogram
	outcomes metric.Int64Counter
	reg      metric.Registration
}

func newMetrics(meter metric.Meter, s *Service) (metrics, error) {
	var m metrics
	var errs []error
	var err error
	bounds := make([]float64, len(latenessBoundsMs))
	for i, b := range latenessBoundsMs {
		bounds[i] = b / 1000
	}
	m.lateness, err = meter.Float64Histogram("palace_clock_lateness",
		metric.WithDescription("instant the game service judged an applied deadline (its Redis time as it read the game, before the commit) minus the deadline entry's instant (for a flag: budget + lag grace + 1 ms)"), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(bounds...))
	errs = append(errs, err)
	m.outcomes, err = meter.Int64Counter("palace_clock_deadlines",
		metric.WithDescription("due deadline entries handled, by outcome: flag, milestone, setup, abort, excuse (applied: excuse is a deadline moved later, for a storage outage), recheck (not its game's current deadline, or of a game not found, and younger than --clock-stale-after: checked again, as a commit making it current may be on its way), stale, retry, error (an entry that failed, or a shard whose due entries could not be read, once per failed read)"))
	errs = append(errs, err)
	owned, err := meter.Int64ObservableGauge("palace_clock_owned_shards", metric.WithDescription("deadline index shards this replica sweeps"))
	errs = append(errs, err)
	pending, err := meter.Int64ObservableGauge("palace_clock_pending_deadlines", metric.WithDescription("entries in each deadline index shard this replica sweeps"))
	errs = append(errs, err)
	age, err := meter.Float64ObservableGauge("palace_clock_sweep_age", metric.WithUnit("s"),
		metric.WithDescription("time since each owned shard was last read: a stuck sweeper shows here"))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return m, fmt.Errorf("clock metrics: %w", err)
	}
	m.reg, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		shards := s.Owned()
		o.ObserveInt64(owned, int64(len(shards)))
		now := time.Now()
		for _, sh := range shards {
			attrs := metric.WithAttributes(attribute.Int("shard", sh))
			o.ObserveInt64(pending, s.health[sh].pending.Load(), attrs)
			if last := s.health[sh].lastSweepMs.Load(); last != 0 {
				o.ObserveFloat64(age, now.Sub(time.UnixMilli(last)).Seconds(), attrs)
			}
		}
		return nil
	}, owned, pending, age)
	if err != nil {
		return m, fmt.Errorf("clock metrics: %w", err)
	}
	return m, nil
}

func (m metrics) close() error {
	if m.reg == nil {
		return nil
	}
	return m.reg.Unregister()
}
