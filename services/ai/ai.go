// Package ai binds the AI service (palace.ai.v1.AIService) and the AI
// workers to a Palace process.
package ai

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/palacehq/palace/pkg/aijobs"
	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/engine"
	aiv1 "github.com/palacehq/palace/pkg/gen/palace/ai/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redisx"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/pkg/uci"
	"github.com/palacehq/palace/services/ai/internal/handler"
	"github.com/palacehq/palace/services/ai/internal/worker"
)

// Config configures the AI service and its workers.
type Config struct {
	// GameAddr is the game service; empty means this process.
	GameAddr string
	// KeyPrefix must match the game service's (the job queue's keys).
	KeyPrefix string
	// Workers is the number of job workers in this process (0: none).
	Workers int
	// Engines is the number of concurrent BestMove/Analyze searches;
	// MaxWaiting bounds the calls waiting for one.
	Engines    int
	MaxWaiting int
	HashMB     int
	// ClaimAfter is how long a job may stay unfinished before another
	// worker takes it over (longer than the slowest level's think).
	ClaimAfter time.Duration
	// JobAttempts is how many times a job is handed out before it is
	// dead-lettered (0: no limit).
	JobAttempts int
	// UCIEngine is an external UCI engine binary the workers use instead
	// of the built-in engine; UCIOptions are "name=value" pairs for it.
	UCIEngine  string
	UCIOptions string
	// UCIMoveTimeout bounds one move of the external engine (0: 30 s, far
	// beyond the 1 s it is asked to think): one that hangs is replaced.
	UCIMoveTimeout time.Duration
}

// defaultUCIMoveTimeout is --ai-uci-move-timeout's default, far above the
// external engine's move time.
const defaultUCIMoveTimeout = 30 * time.Second

// RegisterFlags defines every flag of the AI service, those it shares with
// the game service included (aid). In `palace serve` the game service
// defines those and is in the process; use RegisterOwnFlags there and copy
// the key prefix over.
func (c *Config) RegisterFlags(fs *flag.FlagSet, defaultWorkers int) {
	app.KeyPrefixFlag(fs, &c.KeyPrefix)
	app.GameAddrFlag(fs, &c.GameAddr)
	c.RegisterOwnFlags(fs, defaultWorkers)
}

// RegisterOwnFlags defines the flags only the AI service has.
func (c *Config) RegisterOwnFlags(fs *flag.FlagSet, defaultWorkers int) {
	app.IntFlag(fs, &c.Workers, "ai-workers", defaultWorkers, "AI job workers in this process")
	app.IntFlag(fs, &c.Engines, "ai-engines", 2, "concurrent BestMove/Analyze searches")
	app.IntFlag(fs, &c.MaxWaiting, "ai-max-waiting", 64, "most BestMove/Analyze calls waiting for a busy engine; one more is refused with ResourceExhausted (0: none waits, a call finding every engine busy is refused)")
	app.IntFlag(fs, &c.HashMB, "ai-hash-mb", 32, "transposition table per engine, MiB")
	app.DurationFlag(fs, &c.ClaimAfter, "ai-claim-after", 30*time.Second, "take over a job left unfinished this long, even by a worker that lives (the job of one whose lease lapsed is taken over within seconds)")
	app.IntFlag(fs, &c.JobAttempts, "ai-job-attempts", 0, "dead-letter a job after this many counted deliveries (a postponed one, or one handed back untried, does not count); 0: no limit, so that no job is given up during an outage of the game service")
	app.StringFlag(fs, &c.UCIEngine, "ai-uci-engine", "", "external UCI engine binary for the workers (default: built-in engine)")
	app.StringFlag(fs, &c.UCIOptions, "ai-uci-options", "", "options for the external engine: name=value[,name=value]")
	app.DurationFlag(fs, &c.UCIMoveTimeout, "ai-uci-move-timeout", defaultUCIMoveTimeout, "longest wait for the external engine's move; one that takes longer is restarted")
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Workers < 0 || c.Workers > 256 {
		errs = append(errs, fmt.Errorf("--ai-workers %d: want 0..256", c.Workers))
	}
	if c.MaxWaiting < 0 || c.MaxWaiting > 100000 {
		errs = append(errs, fmt.Errorf("--ai-max-waiting %d: want 0..100000", c.MaxWaiting))
	}
	if c.Engines < 1 || c.Engines > 256 {
		errs = append(errs, fmt.Errorf("--ai-engines %d: want 1..256", c.Engines))
	}
	if c.HashMB < 1 || c.HashMB > 4096 {
		errs = append(errs, fmt.Errorf("--ai-hash-mb %d: want 1..4096", c.HashMB))
	}
	if c.JobAttempts < 0 || c.JobAttempts > 1000 {
		errs = append(errs, fmt.Errorf("--ai-job-attempts %d: want 0..1000", c.JobAttempts))
	}
	if c.UCIMoveTimeout < 0 {
		errs = append(errs, errors.New("--ai-uci-move-timeout must not be negative"))
	}
	if err := redisx.CheckKeyPrefix(c.KeyPrefix); err != nil {
		errs = append(errs, fmt.Errorf("--key-prefix: %w", err))
	}
	if err := app.CheckTarget(c.GameAddr); err != nil {
		errs = append(errs, fmt.Errorf("--game-addr: %w", err))
	}
	if c.ClaimAfter < time.Second {
		errs = append(errs, errors.New("--ai-claim-after must be at least 1s"))
	}
	if c.UCIEngine != "" {
		if _, err := os.Stat(c.UCIEngine); err != nil {
			errs = append(errs, fmt.Errorf("--ai-uci-engine: %w", err))
		}
	}
	if _, err := uciOptions(c.UCIOptions); err != nil {
		errs = append(errs, fmt.Errorf("--ai-uci-options: %w", err))
	}
	if c.UCIOptions != "" && c.UCIEngine == "" {
		errs = append(errs, errors.New("--ai-uci-options: given without --ai-uci-engine, the built-in engine plays and takes no options"))
	}
	return errors.Join(errs...)
}

// uciOption is one name=value of --ai-uci-options.
type uciOption struct{ name, value string }

// uciOptions reads --ai-uci-options: name=value pairs separated by commas.
// An entry without a name or an "=" is an error, not dropped: the engine
// would play without the option the operator meant to set.
func uciOptions(s string) ([]uciOption, error) {
	var opts []uciOption
	for opt := range strings.SplitSeq(s, ",") {
		opt = strings.TrimSpace(opt)
		if opt == "" {
			continue
		}
		name, value, ok := strings.Cut(opt, "=")
		if name = strings.TrimSpace(name); !ok || name == "" {
			return nil, fmt.Errorf("%q: want name=value", opt)
		}
		opts = append(opts, uciOption{name: name, value: strings.TrimSpace(value)})
	}
	return opts, nil
}

// Bind registers the AI service and starts the workers.
func Bind(cfg Config) app.Binder {
	return func(ctx context.Context, rt *app.Runtime) (func() error, error) {
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("ai config: %w", err)
		}
		log := rt.Log.With("component", "ai")
		rt.Server.RegisterService(&aiv1.AIService_ServiceDesc, handler.New(log, cfg.Engines, cfg.HashMB, cfg.MaxWaiting))
		if cfg.Workers == 0 {
			return nil, nil
		}
		cc, err := rt.Dial(cfg.GameAddr)
		if err != nil {
			return nil, err
		}
		// Each idle worker holds a connection through its wait for a job.
		rdb, err := rt.RedisForWaiting(ctx, cfg.Workers, "palace-ai-workers")
		if err != nil {
			_ = cc.Close()
			return nil, err
		}
		closeConns := func() error { return errors.Join(rdb.Close(), cc.Close()) }
		q := aijobs.New(rdb, cfg.KeyPrefix)
		q.ClaimAfter = cfg.ClaimAfter
		q.MaxAttempts = int64(cfg.JobAttempts)
		q.Log = log
		if err := q.Ensure(ctx); err != nil {
			_ = closeConns()
			return nil, err
		}
		// Before any worker runs, so that games created from now on queue
		// their background jobs in the lane these workers read.
		if err := q.ReadBothLanes(ctx); err != nil {
			_ = closeConns()
			return nil, err
		}
		m, err := newMetrics(rt.Tel.Meter.Meter("palace/ai"), q)
		if err != nil {
			_ = closeConns()
			return nil, err
		}
		wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		var wg sync.WaitGroup
		host, _ := os.Hostname()
		// A container restarted in place keeps its host name and, as the
		// image's entrypoint, its pid: without a part of its own, each
		// start would take the consumer names of the one before, whose
		// job then looks held by a live worker until --ai-claim-after.
		start := strconv.FormatUint(rand.Uint64()&0xffffffff, 36)
		var closers []func() error
		for i := range cfg.Workers {
			mover, closeMover, err := newMover(wctx, cfg)
			if err != nil {
				cancel()
				wg.Wait()
				// The engines started for the workers before: an engine
				// process outlives the context it was started with.
				for _, c := range closers {
					_ = c()
				}
				_ = closeConns()
				return nil, err
			}
			if closeMover != nil {
				closers = append(closers, closeMover)
			}
			w := &worker.Worker{
				Name: fmt.Sprintf("%s-%d-%s-%d", host, os.Getpid(), start, i), Log: log.With("worker", i),
				Queue: q, Games: gamev1.NewGameServiceClient(cc), Mover: mover, Metrics: m,
			}
			wg.Go(func() { w.Run(wctx) })
		}
		idle := staleConsumer(cfg.ClaimAfter)
		wg.Go(func() { worker.PruneConsumers(wctx, log, q, idle/4, idle) })
		log.Info("ai workers started", "workers", cfg.Workers, "engine", engineName(cfg))
		return func() error {
			cancel()
			wg.Wait()
			var errs []error
			for _, c := range closers {
				errs = append(errs, c())
			}
			return errors.Join(append(errs, closeConns())...)
		}, nil
	}
}

// staleConsumer is how long a consumer of the queue stays idle before the
// workers delete it (if it holds no job). Redis 7.0 counts idle time from
// a consumer's last job, so a live worker long without one goes too: its
// next job adds it back. Waiting long keeps the group from churning.
func staleConsumer(claimAfter time.Duration) time.Duration {
	return max(10*claimAfter, time.Hour)
}

func engineName(cfg Config) string {
	if cfg.UCIEngine != "" {
		return cfg.UCIEngine
	}
	return "built-in"
}

func newMover(ctx context.Context, cfg Config) (worker.Mover, func() error, error) {
	if cfg.UCIEngine == "" {
		return worker.NewBuiltin(cfg.HashMB), nil, nil
	}
	start := func(ctx context.Context) (*uci.Client, error) {
		c, err := uci.Start(ctx, cfg.UCIEngine)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", cfg.UCIEngine, err)
		}
		opts, err := uciOptions(cfg.UCIOptions)
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("--ai-uci-options: %w", err)
		}
		for _, o := range opts {
			if err := c.SetOption(ctx, o.name, o.value); err != nil {
				_ = c.Close()
				return nil, fmt.Errorf("%s option %s: %w", cfg.UCIEngine, o.name, err)
			}
		}
		return c, nil
	}
	// Started now, so that a wrong path or option stops the service at once.
	c, err := start(ctx)
	if err != nil {
		return nil, nil, err
	}
	u := &uciMover{start: start, c: c, timeout: cmp.Or(cfg.UCIMoveTimeout, defaultUCIMoveTimeout)}
	return u, u.close, nil
}

// uciMover plays with an external engine; its strength and its time per
// move are its own options, not the seat's level, and the game's clock
// caps that time as it caps the built-in engine's. An engine that fails (it crashed, hung, or
// answered nonsense such as an illegal move, which pkg/uci refuses) is not
// asked again: a new one is started at once.
type uciMover struct {
	start   func(context.Context) (*uci.Client, error)
	c       *uci.Client // nil while no engine could be started, until the next move
	timeout time.Duration
}

func (u *uciMover) Move(ctx context.Context, v rules.Variant, startFEN string, moves []rules.Move, _ int, _ uint64, budget time.Duration) (rules.Move, uint64, error) {
	// The clock runs from now: an engine started for this move takes its
	// start from the budget, not on top of it.
	deadline := time.Now().Add(budget)
	mctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	if u.c == nil {
		c, err := u.start(mctx)
		if err != nil {
			return rules.NoMove, 0, err
		}
		u.c = c
	}
	r, err := u.play(mctx, v, startFEN, moves, deadline, budget > 0)
	switch {
	case errors.Is(err, engine.ErrNoLegalMove):
		// A true answer (pkg/uci checks it): the engine is sound.
		return rules.NoMove, 0, err
	case err != nil:
		return rules.NoMove, 0, errors.Join(fmt.Errorf("external engine failed, replacing it: %w", err), u.replace(ctx))
	}
	return r.Move, 0, nil
}

// hungAfter is how long past its time an engine that was asked to stop
// may take to answer before it is taken for hung.
const hungAfter = time.Second

// replace closes the engine that failed and starts the next one now, while
// the failed move's job waits for its retry: started at the next move, the
// engine's start (loading a network can take seconds) would eat that
// move's budget. If the start fails, the next move tries again.
func (u *uciMover) replace(ctx context.Context) error {
	_ = u.c.Close()
	u.c = nil
	if ctx.Err() != nil {
		return nil // stopping: a move to come starts one
	}
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	c, err := u.start(ctx)
	if err != nil {
		return fmt.Errorf("replacing the external engine: %w", err)
	}
	u.c = c
	return nil
}

// play asks the engine for its move by deadline (timed; else within its
// own limits). Its ucinewgame comes out of the time too: an engine with a
// large hash takes hundreds of milliseconds to clear it.
func (u *uciMover) play(ctx context.Context, v rules.Variant, startFEN string, moves []rules.Move, deadline time.Time, timed bool) (engine.Reply, error) {
	if err := u.c.NewGame(ctx, v); err != nil {
		return engine.Reply{}, err
	}
	var budget time.Duration
	if timed {
		budget = max(time.Until(deadline), time.Millisecond)
		// Asked to stop once its time is spent (pkg/uci), an engine that
		// does not answer within hungAfter more has hung: it is replaced
		// then, not after the move timeout, long past the AI's clock. Its
		// start and its ucinewgame, slow but sound, are not held to it.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, budget+hungAfter)
		defer cancel()
	}
	return u.c.MoveWithin(ctx, v, startFEN, moves, budget)
}

func (u *uciMover) close() error {
	if u.c == nil {
		return nil
	}
	return u.c.Close()
}

// The SDK's default histogram bounds (0, 5, 10, 25 ... 10000) are made
// for milliseconds: in seconds, every job waited and every move thought
// for would fall in one bucket, and scaling on job wait would see nothing.
var (
	// A job is normally taken within milliseconds; a backlog makes it
	// seconds, and a job of a dead worker is taken over after about 5 s,
	// of a hung one after --ai-claim-after (30 s).
	jobWaitBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	// Level 1 thinks for about a millisecond, level 10 up to 5 s; an
	// external engine is given up on after --ai-uci-move-timeout (30 s).
	thinkBounds = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30}
)

// gaugeReadTimeout bounds the wait for each read of Redis behind a
// scrape (see redisx.TimedReads): a queue not read in time is left
// unreported.
const gaugeReadTimeout = 500 * time.Millisecond

func newMetrics(meter metric.Meter, q *aijobs.Queue) (*worker.Metrics, error) {
	var m worker.Metrics
	var errs []error
	var err error
	m.Wait, err = meter.Float64Histogram("palace_ai_job_wait_seconds", metric.WithDescription("time from queueing an AI job to a worker taking it, by lane"), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(jobWaitBounds...))
	errs = append(errs, err)
	m.Jobs, err = meter.Int64Counter("palace_ai_jobs_total", metric.WithDescription("AI moves computed"))
	errs = append(errs, err)
	m.Nodes, err = meter.Int64Counter("palace_ai_nodes_total", metric.WithDescription("nodes searched by AI workers (rate: nodes/s)"))
	errs = append(errs, err)
	m.Think, err = meter.Float64Histogram("palace_ai_think_seconds", metric.WithDescription("time to compute one AI move"), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(thinkBounds...))
	errs = append(errs, err)
	depths, dead := redisx.NewTimedReads(gaugeReadTimeout), redisx.NewTimedReads(gaugeReadTimeout)
	_, err = meter.Int64ObservableGauge("palace_ai_queue_depth", metric.WithDescription("AI jobs waiting or in progress, by lane: interactive (games a person plays) or background (games between two AI seats)"),
		metric.WithInt64Callback(func(ctx context.Context, o metric.Int64Observer) error {
			d, err := redisx.TimedRead(ctx, depths, q.Depths)
			if err == nil {
				o.Observe(d.Interactive, worker.LaneAttr(false))
				o.Observe(d.Background, worker.LaneAttr(true))
			}
			return nil
		}))
	errs = append(errs, err)
	_, err = meter.Int64ObservableGauge("palace_ai_dead_jobs", metric.WithDescription("AI jobs dead-lettered (unreadable, or never finished) and kept for a look"),
		metric.WithInt64Callback(func(ctx context.Context, o metric.Int64Observer) error {
			n, err := redisx.TimedRead(ctx, dead, q.Dead)
			if err == nil {
				o.Observe(n)
			}
			return nil
		}))
	errs = append(errs, err)
	return &m, errors.Join(errs...)
}
