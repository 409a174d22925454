// Package clock binds the clock service (palace.clock.v1.ClockService) to
// a Palace process: the sweepers that find expired deadlines in the
// deadline index and have the game service end those games on time, and
// the API that reports clocks and sweeper statistics.
package clock

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"time"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/deadline"
	clockv1 "github.com/palacehq/palace/pkg/gen/palace/clock/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redisx"
	"github.com/palacehq/palace/services/clock/internal/handler"
	"github.com/palacehq/palace/services/clock/internal/sweep"
)

// Config configures the clock service.
type Config struct {
	// GameAddr is the game service's address; empty means this process.
	GameAddr string
	// KeyPrefix and DeadlineShards locate the deadline index and must be
	// the game service's own (its --key-prefix and --deadline-shards).
	KeyPrefix      string
	DeadlineShards int
	// ReplicaID names this replica in shard leases; empty: generated.
	ReplicaID string
	// LeaseTTL bounds how long a dead replica's shards wait for another.
	LeaseTTL time.Duration
	// Tick is how often leases are renewed and shards rebalanced.
	Tick time.Duration
	// Poll is the longest a sweeper sleeps between two reads.
	Poll time.Duration
	// Batch is how many due entries one read of a shard takes.
	Batch int
	// Workers bounds the concurrent calls to the game service.
	Workers int
	// CallTimeout bounds one call to the game service.
	CallTimeout time.Duration
	// StaleAfter is how long an entry that is not its game's current
	// deadline is re-checked before it is removed.
	StaleAfter time.Duration
	// HandOverAfter is how long every call to the game service may fail,
	// or go unanswered, before the replica hands its shards to the others.
	HandOverAfter time.Duration
}

// RegisterFlags defines every flag of the clock service, those it shares
// with the game service included (clockd). In `palace serve` the game
// service defines those and is in the process; use RegisterOwnFlags there
// and copy the deadline index's over.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	app.KeyPrefixFlag(fs, &c.KeyPrefix)
	app.DeadlineShardsFlag(fs, &c.DeadlineShards)
	app.GameAddrFlag(fs, &c.GameAddr)
	c.RegisterOwnFlags(fs)
}

// RegisterOwnFlags defines the flags only the clock service has.
func (c *Config) RegisterOwnFlags(fs *flag.FlagSet) {
	app.StringFlag(fs, &c.ReplicaID, "clock-replica-id", "", "id of this clock replica in shard leases; empty: host-pid-random")
	app.DurationFlag(fs, &c.LeaseTTL, "clock-lease-ttl", sweep.DefaultLeaseTTL, "lifetime of a shard lease after its last renewal: the longest a dead replica's deadlines wait")
	app.DurationFlag(fs, &c.Tick, "clock-tick", sweep.DefaultTick, "how often shard leases are renewed and rebalanced")
	app.DurationFlag(fs, &c.Poll, "clock-poll", sweep.DefaultPoll, "longest sleep of a sweeper between two reads of its shard")
	app.IntFlag(fs, &c.Batch, "clock-batch", sweep.DefaultBatch, "due deadlines of one shard handed to the game service at once")
	app.IntFlag(fs, &c.Workers, "clock-workers", sweep.DefaultWorkers, "concurrent ExpireDeadline calls per replica")
	app.DurationFlag(fs, &c.CallTimeout, "clock-call-timeout", sweep.DefaultCallTimeout, "timeout of one call to the game service: an ExpireDeadline, or the read behind GetClocks")
	app.DurationFlag(fs, &c.HandOverAfter, "clock-hand-over-after", sweep.DefaultHandOverAfter, "how long every call of this replica to the game service may fail (unreachable, or refusing its credential) or go unanswered (a frozen game service) before a probe is sent; if the probe fails too, the replica hands its shards to the other replicas and reports the clock service NOT_SERVING until a probe gets an answer")
	app.DurationFlag(fs, &c.StaleAfter, "clock-stale-after", sweep.DefaultStaleAfter, "how long past its instant a deadline entry that is not its game's current one is re-checked before removal (a commit making it current may be on its way)")
}

// DefaultConfig is the configuration the flags default to, the
// environment left out.
func DefaultConfig() Config {
	var c Config
	fs := flag.NewFlagSet("defaults", flag.ContinueOnError)
	c.RegisterFlags(fs)
	app.ResetToDefaults(fs)
	return c
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if err := deadline.CheckShardCount(c.DeadlineShards); err != nil {
		errs = append(errs, fmt.Errorf("--deadline-shards %w", err))
	}
	for name, d := range map[string]time.Duration{"clock-lease-ttl": c.LeaseTTL, "clock-tick": c.Tick, "clock-poll": c.Poll, "clock-call-timeout": c.CallTimeout, "clock-stale-after": c.StaleAfter, "clock-hand-over-after": c.HandOverAfter} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("--%s must be positive", name))
		}
	}
	if err := redisx.CheckKeyPrefix(c.KeyPrefix); err != nil {
		errs = append(errs, fmt.Errorf("--key-prefix: %w", err))
	}
	if err := app.CheckTarget(c.GameAddr); err != nil {
		errs = append(errs, fmt.Errorf("--game-addr: %w", err))
	}
	// The sweepers' own limits, checked here with the flags' names.
	if c.Batch < 1 || c.Batch > sweep.MaxBatch {
		errs = append(errs, fmt.Errorf("--clock-batch %d: want 1..%d", c.Batch, sweep.MaxBatch))
	}
	if c.Workers < 1 || c.Workers > sweep.MaxWorkers {
		errs = append(errs, fmt.Errorf("--clock-workers %d: want 1..%d", c.Workers, sweep.MaxWorkers))
	}
	if c.LeaseTTL > 0 && c.Tick > 0 && c.LeaseTTL < 3*c.Tick {
		errs = append(errs, fmt.Errorf("--clock-lease-ttl %v must be at least 3 times --clock-tick %v (%v): a lease must survive a late renewal", c.LeaseTTL, c.Tick, 3*c.Tick))
	}
	return errors.Join(errs...)
}

func (c Config) sweep() sweep.Config {
	return sweep.Config{
		ReplicaID: c.ReplicaID, LeaseTTL: c.LeaseTTL, Tick: c.Tick, Poll: c.Poll,
		Batch: c.Batch, Workers: c.Workers, CallTimeout: c.CallTimeout, StaleAfter: c.StaleAfter,
		HandOverAfter: c.HandOverAfter,
	}
}

// Bind registers the clock service and starts its sweepers. They stop
// and hand their shards over (releasing the leases) when the process
// stops cleanly.
func Bind(cfg Config) app.Binder {
	return func(ctx context.Context, rt *app.Runtime) (func() error, error) {
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("clock config: %w", err)
		}
		if rt.Redis == nil {
			return nil, errors.New("clock service: Redis is required")
		}
		if cfg.ReplicaID == "" {
			cfg.ReplicaID = sweep.NewReplicaID()
		}
		log := rt.Log.With("component", "clock")
		idx, err := deadline.New(rt.Redis, cfg.KeyPrefix, cfg.DeadlineShards)
		if err != nil {
			return nil, fmt.Errorf("clock service: %w", err)
		}
		// A differing count names --deadline-shards itself; Redis refusing
		// (a read-only replica) is no fault of the flag.
		if err := idx.CheckShards(ctx); err != nil {
			return nil, fmt.Errorf("clock service: %w", err)
		}
		cc, err := rt.Dial(cfg.GameAddr)
		if err != nil {
			return nil, fmt.Errorf("clock service: game client: %w", err)
		}
		if cfg.GameAddr != "" {
			rt.WarnIfServiceKeysRandom(log, "the game service at "+cfg.GameAddr+" refuses this process's deadlines")
		}
		// Connect now rather than at the first deadline, which would
		// otherwise pay for the connection in lateness.
		cc.Connect()
		games := gamev1.NewGameServiceClient(cc)
		swCfg := cfg.sweep()
		serving := servingWhen{set: func(ok bool) { rt.Server.SetServing(clockv1.ClockService_ServiceDesc.ServiceName, ok) }, reached: true, agrees: true}
		swCfg.OnReach, swCfg.OnIndex = serving.reach, serving.index
		sw, err := sweep.New(log, rt.Redis, idx, games, rt.Tel.Meter.Meter("palace/clock"), swCfg)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("clock service: %w", err), cc.Close())
		}
		rt.Server.RegisterService(&clockv1.ClockService_ServiceDesc, handler.New(log, games, sw, rt.ServiceKeys, cfg.CallTimeout))
		// The sweepers outlive the serving context: deadlines keep being
		// handled while the server drains, until the closer runs.
		runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan error, 1)
		go func() { done <- sw.Run(runCtx) }()
		log.Info("clock sweepers started", "replica", cfg.ReplicaID, "shards", cfg.DeadlineShards, "prefix", cfg.KeyPrefix)
		return func() error {
			cancel()
			err := <-done
			rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer rcancel()
			return errors.Join(err, sw.Release(rctx), sw.Close(), cc.Close())
		}, nil
	}
}

// servingWhen reports the clock service serving while its replica
// reaches the game service and sweeps the index that service writes.
type servingWhen struct {
	set             func(bool)
	mu              sync.Mutex
	reached, agrees bool
}

func (w *servingWhen) reach(ok bool) { w.update(func() { w.reached = ok }) }
func (w *servingWhen) index(ok bool) { w.update(func() { w.agrees = ok }) }

func (w *servingWhen) update(change func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	change()
	w.set(w.reached && w.agrees)
}
