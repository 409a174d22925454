// Package matcher runs the pairing loop: every interval it pairs the
// waiting tickets of every pool (one atomic Lua pass per pool, so any
// number of replicas may run it at once), creates each match's game
// through the game service and hands both players their seats. A match
// whose game creation stalls (its replica crashed) is taken over by any
// replica after StallAfter; the game's request id is derived from the
// match, so the retry finds the same game.
package matcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/palacehq/palace/pkg/redisx"
	"github.com/palacehq/palace/services/matchmaking/internal/games"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// Config tunes the loop.
type Config struct {
	Interval time.Duration
	// BaseWindow, WidenPerSecond and MaxWindow: see store.PairParams.
	BaseWindow, WidenPerSecond, MaxWindow float64
	// MaxPairsPerPass bounds the pairs of one pool's pass, and so the part
	// of its Lua script's time they take; the script reads every ticket
	// of the pool whatever the bound.
	MaxPairsPerPass int
	// Keep is how long tickets stay readable once matched.
	Keep time.Duration
	// StallAfter is when another replica takes over a game creation.
	StallAfter time.Duration
	// GiveUpAfter is when a match whose game could not be made is given
	// up, its tickets expired, so that its players are not held paired
	// while the game service is away and handed a game long after they
	// left. 0: never.
	GiveUpAfter time.Duration
	// CreateTimeout bounds one try at completing a match (Complete): no
	// write of a try outlives it. 0: 30 s.
	CreateTimeout time.Duration
	// LateWrites is how much later than its CreateTimeout a try's last
	// write may still land: one sent just before (go-redis' write timeout,
	// 3 s by default, then the network), and the difference between
	// replicas' clocks. 0: 5 s.
	LateWrites time.Duration
	// Concurrency bounds game creations in flight.
	Concurrency int
	// IdleAfter is when a pool without entries is forgotten.
	IdleAfter time.Duration
	Now       func() time.Time
}

// Matcher pairs tickets and creates their games.
type Matcher struct {
	cfg   Config
	log   *slog.Logger
	store *store.Store
	games *games.Creator
	// jobs feeds the creation workers; a pass only waits when it is full,
	// so a slow game service delays creations, not pairing.
	jobs chan job
	wg   sync.WaitGroup

	matches     metric.Int64Counter
	timeToMatch metric.Float64Histogram
	passTime    metric.Float64Histogram
	expired     metric.Int64Counter

	mu    sync.Mutex
	pools []store.Pool
	// listed is when pools was last read from the registry: a pass reads
	// it at most once per second (one round trip less per pass); pools
	// entered through this replica join at once (Touch), others within a
	// second.
	listed time.Time
}

// Touch makes a pool known to this replica's next pass.
func (m *Matcher) Touch(p store.Pool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, q := range m.pools {
		if q == p {
			return
		}
	}
	m.pools = append(m.pools, p)
}

// New returns a matcher; Run starts it.
func New(cfg Config, log *slog.Logger, st *store.Store, gc *games.Creator, meter metric.Meter) (*Matcher, error) {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 64
	}
	if cfg.MaxPairsPerPass <= 0 {
		cfg.MaxPairsPerPass = 1000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CreateTimeout <= 0 {
		cfg.CreateTimeout = 30 * time.Second
	}
	if cfg.LateWrites <= 0 {
		cfg.LateWrites = 5 * time.Second
	}
	m := &Matcher{cfg: cfg, log: log, store: st, games: gc, jobs: make(chan job, 16*cfg.Concurrency)}
	var errs []error
	var err error
	m.matches, err = meter.Int64Counter("palace.matchmaking.matches", metric.WithDescription("games created from the queue (rate: matches per second)"))
	errs = append(errs, err)
	m.timeToMatch, err = meter.Float64Histogram("palace.matchmaking.time_to_match", metric.WithUnit("s"),
		metric.WithDescription("from entering the queue to the game's creation"),
		metric.WithExplicitBucketBoundaries(0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600))
	errs = append(errs, err)
	m.passTime, err = meter.Float64Histogram("palace.matchmaking.pairing_pass", metric.WithUnit("s"),
		metric.WithDescription("duration of one pairing pass over every pool"),
		metric.WithExplicitBucketBoundaries(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1))
	errs = append(errs, err)
	m.expired, err = meter.Int64Counter("palace.matchmaking.tickets_expired", metric.WithDescription("tickets that found nobody in time"))
	errs = append(errs, err)
	waiting, err := meter.Int64ObservableGauge("palace.matchmaking.tickets_waiting", metric.WithDescription("tickets waiting per pool"))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	counting := redisx.NewTimedReads(2 * time.Second)
	_, err = meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		pools := m.knownPools()
		if len(pools) == 0 {
			return nil
		}
		counts, err := redisx.TimedRead(ctx, counting, func(ctx context.Context) ([]store.Counts, error) { return m.store.Count(ctx, pools) })
		if err != nil {
			return err
		}
		// By MetricLabel, as the other pool metrics: a series per control
		// that players invent would stay in the metrics' store for its
		// retention. Pools of one label are summed, a label observed once.
		byLabel := map[string]int64{}
		for i, p := range pools {
			byLabel[p.MetricLabel()] += counts[i].Waiting
		}
		for label, n := range byLabel {
			o.ObserveInt64(waiting, n, metric.WithAttributes(attribute.String("pool", label)))
		}
		return nil
	}, waiting)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Matcher) knownPools() []store.Pool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]store.Pool(nil), m.pools...)
}

type job struct {
	pool  store.Pool
	match store.Match
}

// Run pairs every interval until ctx ends, then lets the creation workers
// finish the matches already made (on their own context, so a stop does
// not strand a match half-made; a stalled one is retried by any replica).
func (m *Matcher) Run(ctx context.Context) {
	for range m.cfg.Concurrency {
		m.wg.Add(1)
		go m.worker()
	}
	defer func() {
		close(m.jobs)
		m.wg.Wait()
	}()
	pass := time.NewTicker(m.cfg.Interval)
	defer pass.Stop()
	retry := time.NewTicker(max(m.cfg.StallAfter/2, time.Second))
	defer retry.Stop()
	idle := time.NewTicker(time.Minute)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-pass.C:
			m.Pass(ctx)
		case <-retry.C:
			m.recoverStalled(ctx)
		case <-idle.C:
			m.dropIdle(ctx)
		}
	}
}

// Pass runs one pairing pass over every pool and starts the games of the
// matches it made.
func (m *Matcher) Pass(ctx context.Context) {
	start := time.Now()
	pools, err := m.passPools(ctx, start)
	if err != nil {
		if ctx.Err() == nil {
			m.log.WarnContext(ctx, "pairing: list pools", "err", err)
		}
		return
	}
	if len(pools) == 0 {
		return
	}
	now := m.cfg.Now()
	results := m.store.Pair(ctx, pools, store.PairParams{
		Now: now, BaseWindow: m.cfg.BaseWindow, WidenPerSecond: m.cfg.WidenPerSecond, MaxWindow: m.cfg.MaxWindow,
		MaxPairs: m.cfg.MaxPairsPerPass, Keep: m.cfg.Keep,
	})
	m.passTime.Record(ctx, time.Since(start).Seconds())
	// Tickets paired or expired by the pass: their watchers are told now,
	// not at their next poll (a paired ticket may wait for its game for
	// as long as --give-up-after).
	var changed []string
	var failed poolFailures
	for _, r := range results {
		if r.Err != nil {
			failed.add(r.Err)
			continue
		}
		for _, mt := range r.Matches {
			changed = append(changed, mt.A, mt.B)
		}
		if len(r.Expired) > 0 {
			m.expired.Add(ctx, int64(len(r.Expired)), metric.WithAttributes(attribute.String("pool", r.Pool.MetricLabel())))
			changed = append(changed, r.Expired...)
		}
	}
	if ctx.Err() == nil {
		failed.log(ctx, m.log, "pairing pass")
	}
	if err := m.store.Publish(ctx, changed...); err != nil {
		m.log.WarnContext(ctx, "pairing: notify paired and expired tickets", "err", err)
	}
	for _, r := range results {
		for _, mt := range r.Matches {
			m.start(r.Pool, mt)
		}
	}
}

// poolFailures gathers the errors of one pass over the pools: when Redis
// is out of reach every pool fails, and a line each (up to --max-pools
// of them, ten passes a second) would bury the log; one line says how
// many failed, with the first error.
type poolFailures struct {
	n     int
	first error
}

func (f *poolFailures) add(err error) {
	if f.n == 0 {
		f.first = err
	}
	f.n++
}

func (f *poolFailures) log(ctx context.Context, log *slog.Logger, what string) {
	if f.n > 0 {
		log.WarnContext(ctx, what, "pools_failed", f.n, "err", f.first)
	}
}

// passPools returns the pools to pair, reading the registry when the
// cached list is older than a second.
func (m *Matcher) passPools(ctx context.Context, now time.Time) ([]store.Pool, error) {
	m.mu.Lock()
	fresh := now.Sub(m.listed) < time.Second
	cached := append([]store.Pool(nil), m.pools...)
	m.mu.Unlock()
	if fresh {
		return cached, nil
	}
	reg, err := m.store.Pools(ctx)
	if err != nil {
		return nil, err
	}
	pools := make([]store.Pool, 0, len(reg))
	for p := range reg {
		pools = append(pools, p)
	}
	sort.Slice(pools, func(i, j int) bool { return pools[i].ID() < pools[j].ID() })
	m.mu.Lock()
	m.pools, m.listed = pools, now
	m.mu.Unlock()
	return pools, nil
}

// start queues a match for a creation worker.
func (m *Matcher) start(pool store.Pool, mt store.Match) { m.jobs <- job{pool: pool, match: mt} }

func (m *Matcher) worker() {
	defer m.wg.Done()
	for j := range m.jobs {
		ctx := context.Background()
		if err := m.Complete(ctx, j.pool, j.match); err != nil {
			// The match stays in its pool's "creating" set: a replica retries
			// it after StallAfter.
			m.log.WarnContext(ctx, "create matched game; will retry", "match", j.match.ID, "pool", j.pool.ID(), "err", err)
		}
	}
}

// Complete creates a match's game (or finds it again on a retry) and
// gives both tickets their seats, within CreateTimeout.
func (m *Matcher) Complete(ctx context.Context, pool store.Pool, mt store.Match) error {
	// Whoever calls: a match given up is dropped from those being created
	// once no try that noted its game before can still list it (giveUp),
	// and every call below, to Redis (go-redis looks at the context
	// before it sends a command, and before each retry) or to the game
	// service, ends with ctx.
	ctx, cancel := context.WithTimeout(ctx, m.cfg.CreateTimeout)
	defer cancel()
	first, second := mt.PlayerA, mt.PlayerB
	aFirst := games.FirstIsA(mt.ID, mt.A, mt.B)
	if !aFirst {
		first, second = second, first
	}
	g, err := m.games.Make(ctx, games.Spec{
		RequestID: games.RequestID("mm", pool.Tag(), mt.ID, mt.A, mt.B),
		Kind:      pool.Kind, Control: pool.Control, Rated: pool.Rated,
		// Queue games are open to spectators.
		Public: true,
		First:  games.Human{ID: first.ID, Name: first.Name, NamedAt: first.NamedAt},
		Second: games.Human{ID: second.ID, Name: second.Name, NamedAt: second.NamedAt},
	})
	if err != nil {
		return err
	}
	// Noted on the match before it is listed anywhere: should this replica
	// die from here on, whoever gives the match up undoes the game.
	err = m.store.MarkMade(ctx, pool, mt.ID, g.ID)
	if errors.Is(err, store.ErrMatchVoid) {
		// Given up first: nobody was told of the game, which is aborted
		// when no first move comes, and nothing lists or records it.
		m.log.WarnContext(ctx, "game made for a match already given up", "match", mt.ID, "game", g.ID, "pool", pool.ID())
		return nil
	}
	if err != nil {
		return err
	}
	if err := m.games.List(ctx, g); err != nil {
		return err
	}
	ga, gb := g.First.Seat, g.Second.Seat
	if !aFirst {
		ga, gb = gb, ga
	}
	// A rated game is recorded as pending before either player can learn
	// of it (so its end cannot be missed); a casual game's record only
	// serves rematches and is written by Finish.
	record := &g
	if pending := m.games.Pending(g); pending != nil {
		if err := m.store.SaveGame(ctx, g, m.games.Keep(), pending); err != nil {
			return err
		}
		record = nil
	}
	now := m.cfg.Now()
	done, err := m.store.Finish(ctx, pool, mt, g.ID, ga, gb, now, m.cfg.Keep, record, m.games.Keep())
	if errors.Is(err, store.ErrMatchVoid) {
		// Given up meanwhile, by a replica that undoes the game too; this
		// one may have listed it since.
		m.log.WarnContext(ctx, "game made for a match already given up", "match", mt.ID, "game", g.ID, "pool", pool.ID())
		return m.undoGame(ctx, pool, mt, g.ID)
	}
	if err != nil {
		return err
	}
	if done {
		attrs := metric.WithAttributes(attribute.String("pool", pool.MetricLabel()))
		m.matches.Add(ctx, 1, attrs)
		m.timeToMatch.Record(ctx, now.Sub(mt.PlayerA.Entered).Seconds(), attrs)
		m.timeToMatch.Record(ctx, now.Sub(mt.PlayerB.Entered).Seconds(), attrs)
	}
	return nil
}

// recoverStalled takes over matches whose game creation stalled.
func (m *Matcher) recoverStalled(ctx context.Context) {
	now := m.cfg.Now()
	var failed poolFailures
	defer func() {
		if ctx.Err() == nil {
			failed.log(ctx, m.log, "claim stalled matches")
		}
	}()
	for _, pool := range m.knownPools() {
		ids, err := m.store.ClaimStalled(ctx, pool, now.Add(-m.cfg.StallAfter), now, 100)
		if err != nil {
			failed.add(fmt.Errorf("pool %s: %w", pool.ID(), err))
			continue
		}
		for _, id := range ids {
			mt, _, _, err := m.store.MatchTickets(ctx, pool, id)
			if errors.Is(err, store.ErrNotFound) {
				m.log.WarnContext(ctx, "dropping a stalled match whose tickets expired", "match", id, "pool", pool.ID())
				if err := m.store.DropStalled(ctx, pool, id); err != nil {
					m.log.WarnContext(ctx, "drop stalled match", "match", id, "err", err)
				}
				continue
			}
			if err != nil {
				m.log.WarnContext(ctx, "read stalled match", "match", id, "err", err)
				continue
			}
			if m.cfg.GiveUpAfter > 0 && now.Sub(mt.PairedAt) > m.cfg.GiveUpAfter {
				v, err := m.giveUp(ctx, pool, mt, now)
				if err != nil {
					m.log.WarnContext(ctx, "give up a stalled match", "match", id, "err", err)
					continue
				}
				if v.GaveUp {
					// Said once: a match whose game was made is looked at
					// again for a while (giveUp).
					if v.Since.UnixMilli() == now.UnixMilli() {
						m.log.WarnContext(ctx, "gave up a match whose game could not be made; its tickets expired", "match", id, "pool", pool.ID(), "paired", mt.PairedAt)
					}
					continue
				}
				// Its game was recorded first, but that record waits for
				// its replicas and its announcement: completing it again
				// confirms and announces it.
			}
			m.log.InfoContext(ctx, "retrying a stalled match", "match", id, "pool", pool.ID())
			m.start(pool, mt)
		}
	}
}

// giveUp gives up a match whose game could not be made in time (Void),
// and undoes the game if one was made for it all the same (by a replica
// that died before completing the match, or that stalled after noting the
// game and lists it still); it gives up nothing when the match's game
// was recorded first (Voided.GaveUp).
//
// A try that noted the game before the give-up may list it and record it
// as pending afterwards, until its CreateTimeout ends: so the match stays
// among those being created, and its game is undone at every look, until
// the give-up is older than that (and LateWrites).
func (m *Matcher) giveUp(ctx context.Context, pool store.Pool, mt store.Match, now time.Time) (store.Voided, error) {
	v, err := m.store.Void(ctx, pool, mt, now, m.cfg.Keep)
	if err != nil || !v.GaveUp || v.Made == "" {
		return v, err
	}
	if err := m.undoGame(ctx, pool, mt, v.Made); err != nil {
		// The match stays among those being created: the next look gives
		// it up again, and undoes the game again.
		return v, err
	}
	if now.Sub(v.Since) <= m.cfg.CreateTimeout+m.cfg.LateWrites {
		return v, nil
	}
	return v, m.store.DropStalled(ctx, pool, mt.ID)
}

// undoGame takes the game made for a match given up off both players'
// lists of games, where it would be a game they never had (and one
// ResumeGame seats them in), and forgets its records: nobody was told of
// it, and it aborts without a first move, so it is neither rated (its
// abort counted against a player who never knew of it) nor offered for a
// rematch. The rating consumer may be settling its end meanwhile, or have
// settled it already (matchmaking was away for longer than the game's
// first-move time): the game is unrated before it leaves pending, so that
// a settle reading it pending counts nothing, and an abort counted before
// is taken back. Every step is idempotent, so it may be run again.
func (m *Matcher) undoGame(ctx context.Context, pool store.Pool, mt store.Match, game string) error {
	for _, p := range []string{mt.PlayerA.ID, mt.PlayerB.ID} {
		if err := m.store.UnlistPlayerGame(ctx, p, game); err != nil {
			return err
		}
	}
	if pool.Rated {
		if err := m.store.Unrate(ctx, pool.Kind, game, mt.PlayerA.ID, mt.PlayerB.ID); err != nil {
			return err
		}
	}
	return m.store.ForgetGame(ctx, game)
}

// dropIdle forgets pools nobody entered for IdleAfter, so the pass does
// not visit every pool ever used.
func (m *Matcher) dropIdle(ctx context.Context) {
	reg, err := m.store.Pools(ctx)
	if err != nil {
		return
	}
	cutoff := m.cfg.Now().Add(-m.cfg.IdleAfter)
	var idle []store.Pool
	for p, last := range reg {
		if last.Before(cutoff) {
			idle = append(idle, p)
		}
	}
	if len(idle) == 0 {
		return
	}
	counts, err := m.store.Count(ctx, idle)
	if err != nil {
		return
	}
	for i, p := range idle {
		if counts[i].Waiting == 0 && counts[i].Creating == 0 {
			if _, err := m.store.DropIdle(ctx, p, cutoff); err != nil {
				m.log.WarnContext(ctx, "drop idle pool", "pool", p.ID(), "err", err)
			}
		}
	}
}
