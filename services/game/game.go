// Package game binds the game service (palace.game.v1.GameService), the
// single writer of live games, to a Palace process.
package game

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/aijobs"
	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/clock"
	"github.com/palacehq/palace/pkg/deadline"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redisx"
	"github.com/palacehq/palace/services/game/internal/handler"
	"github.com/palacehq/palace/services/game/internal/hub"
	"github.com/palacehq/palace/services/game/internal/store"
)

// Config configures the game service.
type Config struct {
	// KeyPrefix is prepended to every Redis key (several deployments or
	// tests may share one Redis).
	KeyPrefix string
	// SigningKeys sign seat credentials: "id:hexsecret,...", the first
	// signs, all verify (rotation). Empty: a random key for this process.
	SigningKeys   string
	SeatTTL       time.Duration
	SetupTime     time.Duration
	FirstMoveTime time.Duration
	Retention     time.Duration
	LiveTTL       time.Duration
	Heartbeat     time.Duration
	MaxStreams    int
	// MaxSpectatorStreams and MaxSeatStreams share the streams out: see
	// handler.Config.
	MaxSpectatorStreams int
	MaxSeatStreams      int
	PresenceGrace       time.Duration
	PresenceLease       time.Duration
	DeadlineShards      int
	LagMaxPerMove       time.Duration
	LagBank             time.Duration
	LagRefill           time.Duration
	// AIJobs queues a job for the AI workers whenever an AI seat must act.
	AIJobs bool
	// AutoPipeline batches the commits of concurrent requests into shared
	// Redis round trips.
	AutoPipeline bool
	// WaitReplicas is how many Redis replicas must hold a commit before
	// it is acknowledged (WAIT), within WaitTimeout; 0: the master alone.
	WaitReplicas int
	WaitTimeout  time.Duration
}

// RegisterFlags defines the game service's flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	app.KeyPrefixFlag(fs, &c.KeyPrefix)
	app.StringFlag(fs, &c.SigningKeys, "seat-signing-keys", "", "seat credential keys id:hexsecret[,id:hexsecret]; first signs, all verify; empty: random, this process only")
	app.DurationFlag(fs, &c.SeatTTL, "seat-ttl", 30*24*time.Hour, "lifetime of a seat credential")
	app.DurationFlag(fs, &c.SetupTime, "setup-time", 60*time.Second, "default time for each Janggi formation choice")
	app.DurationFlag(fs, &c.FirstMoveTime, "first-move-time", 60*time.Second, "default time for each side's first move in clocked games before the game is aborted")
	app.DurationFlag(fs, &c.Retention, "retention", 30*24*time.Hour, "how long finished games stay readable")
	app.DurationFlag(fs, &c.LiveTTL, "live-ttl", 30*24*time.Hour, "how long an unfinished game is kept after its last change by a player or its clock (streams opening and closing do not count), and a game with a deadline to come at least that long past it")
	app.DurationFlag(fs, &c.Heartbeat, "heartbeat", 15*time.Second, "longest silence of an event stream before it sends a heartbeat (each interval is up to a quarter shorter, at random, so that streams opened together do not read Redis together)")
	app.IntFlag(fs, &c.MaxStreams, "max-streams", 50000, "most event streams one process serves at once; one more is refused with ResourceExhausted until one ends")
	app.IntFlag(fs, &c.MaxSpectatorStreams, "max-spectator-streams", 0, "most of --max-streams that streams without a seat credential may hold, so that spectators leave room for the players' own (0: three quarters)")
	app.IntFlag(fs, &c.MaxSeatStreams, "max-seat-streams", handler.DefaultMaxSeatStreams, "most event streams one seat holds in one process; a newer one ends the oldest, with ResourceExhausted, and is refused while as many ended ones have not left (their client reads none of them)")
	app.DurationFlag(fs, &c.PresenceGrace, "presence-grace", 3*time.Second, "how long a seat's stream may be gone before the seat is announced disconnected: a reconnection to the same process within it announces nothing; doubled for each disconnection of the seat announced lately, up to 64 times (0: at once)")
	app.DurationFlag(fs, &c.PresenceLease, "presence-lease", 15*time.Second, "how long the seats a process holds outlive it, should it die without recording its streams closing; then another process announces them disconnected")
	app.DeadlineShardsFlag(fs, &c.DeadlineShards)
	app.DurationFlag(fs, &c.LagMaxPerMove, "lag-max-per-move", time.Second, "most network lag credited to one move (0: no lag compensation)")
	app.DurationFlag(fs, &c.LagBank, "lag-bank", 5*time.Second, "most lag credit a player can hold")
	app.BoolFlag(fs, &c.AIJobs, "ai-jobs", true, "queue jobs for AI workers when an AI seat must act")
	app.BoolFlag(fs, &c.AutoPipeline, "redis-autopipeline", false, "batch the commits of concurrent requests into shared Redis round trips (go-redis' experimental autopipeliner): more moves per second under load, slightly slower single moves")
	app.WaitReplicasFlags(fs, &c.WaitReplicas, &c.WaitTimeout)
	app.DurationFlag(fs, &c.LagRefill, "lag-refill", 500*time.Millisecond, "lag credit a player regains per move")
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	for name, d := range map[string]time.Duration{"seat-ttl": c.SeatTTL, "setup-time": c.SetupTime, "first-move-time": c.FirstMoveTime, "retention": c.Retention, "live-ttl": c.LiveTTL, "heartbeat": c.Heartbeat} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("--%s must be positive", name))
		}
	}
	for name, d := range map[string]time.Duration{"retention": c.Retention, "live-ttl": c.LiveTTL} {
		if d > 0 && d < time.Millisecond {
			// Redis is given whole milliseconds, and a commit given 0
			// keeps the expiry the game had: none, for a new game.
			errs = append(errs, fmt.Errorf("--%s %v: at least 1ms", name, d))
		}
	}
	if c.Heartbeat > 0 && c.Heartbeat < time.Millisecond {
		// Each heartbeat of each stream is a message, and of an idle
		// stream a read: a nanosecond's would spin every stream. (Tests
		// provoke races with a few milliseconds; a deployment keeps the
		// default, seconds.)
		errs = append(errs, fmt.Errorf("--heartbeat %v: at least 1ms", c.Heartbeat))
	}
	if c.SetupTime > 0 && (c.SetupTime < handler.MinSetupTime || c.SetupTime > handler.MaxSetupTime) {
		errs = append(errs, fmt.Errorf("--setup-time %v: want %v..%v", c.SetupTime, handler.MinSetupTime, handler.MaxSetupTime))
	}
	if c.FirstMoveTime > 0 && (c.FirstMoveTime < handler.MinFirstMoveTime || c.FirstMoveTime > handler.MaxFirstMoveTime) {
		errs = append(errs, fmt.Errorf("--first-move-time %v: want %v..%v", c.FirstMoveTime, handler.MinFirstMoveTime, handler.MaxFirstMoveTime))
	}
	if err := redisx.CheckKeyPrefix(c.KeyPrefix); err != nil {
		errs = append(errs, fmt.Errorf("--key-prefix: %w", err))
	}
	if c.MaxStreams >= 1 && (c.MaxSpectatorStreams < 0 || c.MaxSpectatorStreams > c.MaxStreams) {
		errs = append(errs, fmt.Errorf("--max-spectator-streams %d: want 0 (three quarters of --max-streams) up to --max-streams (%d)", c.MaxSpectatorStreams, c.MaxStreams))
	}
	if err := deadline.CheckShardCount(c.DeadlineShards); err != nil {
		errs = append(errs, fmt.Errorf("--deadline-shards %w", err))
	}
	if c.MaxSeatStreams < 1 {
		errs = append(errs, errors.New("--max-seat-streams must be at least 1"))
	}
	if c.MaxStreams < 1 {
		errs = append(errs, errors.New("--max-streams must be at least 1"))
	}
	if c.PresenceGrace < 0 {
		errs = append(errs, fmt.Errorf("--presence-grace must not be negative"))
	}
	if c.PresenceLease < 300*time.Millisecond {
		errs = append(errs, fmt.Errorf("--presence-lease must be at least 300ms"))
	}
	if err := c.lag().Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.replication().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--redis-wait-replicas, --redis-wait-timeout: %w", err))
	}
	if c.WaitReplicas > 0 && c.AutoPipeline {
		errs = append(errs, errors.New("--redis-wait-replicas cannot be combined with --redis-autopipeline, whose batches share connections"))
	}
	return errors.Join(errs...)
}

func (c Config) replication() redisx.Replication {
	return redisx.Replication{Replicas: c.WaitReplicas, Timeout: c.WaitTimeout}
}

func (c Config) lag() clock.LagPolicy {
	return clock.LagPolicy{MaxPerMove: c.LagMaxPerMove, BankCap: c.LagBank, RefillPerMove: c.LagRefill}
}

// Bind registers the game service.
func Bind(cfg Config) app.Binder {
	return func(ctx context.Context, rt *app.Runtime) (func() error, error) {
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("game config: %w", err)
		}
		log := rt.Log.With("component", "game")
		ring, ephemeral, err := rt.SigningKeys("seat-signing-keys", cfg.SigningKeys)
		if err != nil {
			return nil, fmt.Errorf("game: %w", err)
		}
		if ephemeral {
			log.Warn("no --seat-signing-keys: seat credentials are signed with a random key and die with this process")
		}
		rt.WarnIfServiceKeysRandom(log, "CreateGame, IssueSeatCredentials, GetGames, ExpireDeadline and Probe answer only services in this process")
		cfg.replication().WarnIfShort(ctx, rt.Redis, log)
		st, err := store.New(rt.Redis, store.Config{Prefix: cfg.KeyPrefix, LiveTTL: cfg.LiveTTL, Retention: cfg.Retention, AutoPipeline: cfg.AutoPipeline, Replication: cfg.replication()})
		if err != nil {
			return nil, fmt.Errorf("game: %w", err)
		}
		idx, err := deadline.New(rt.Redis, cfg.KeyPrefix, cfg.DeadlineShards)
		if err != nil {
			return nil, err
		}
		// A differing count names --deadline-shards itself; Redis refusing
		// (a read-only replica) is no fault of the flag.
		if err := idx.CheckShards(ctx); err != nil {
			return nil, fmt.Errorf("game: %w", err)
		}
		// A deadline and an AI job are written before the commit that
		// needs them. On one master the commit's own wait covers them
		// (replication is one ordered stream); in a cluster they may live
		// on another master, and wait for its replicas themselves.
		var sideWrites redisx.Replication
		if _, ok := rt.Redis.(*redis.ClusterClient); ok {
			sideWrites = cfg.replication()
		}
		idx.Replication = sideWrites
		var jobs *aijobs.Queue
		if cfg.AIJobs {
			jobs = aijobs.New(rt.Redis, cfg.KeyPrefix)
			jobs.Replication = sideWrites
			jobs.MaxAge = cfg.SeatTTL // a job's credential lives as long: older jobs are void
			if err := jobs.Ensure(ctx); err != nil {
				return nil, err
			}
		}
		h := hub.New(context.WithoutCancel(ctx), rt.Redis, log, hub.Config{Channel: st.ShardChannel, ShardOf: store.Shard, Decode: handler.Notifications()})
		hd, err := handler.New(ctx, log, handler.Config{
			SeatTTL: cfg.SeatTTL, SetupTime: cfg.SetupTime, FirstMoveTime: cfg.FirstMoveTime,
			Lag: cfg.lag(), Heartbeat: cfg.Heartbeat, MaxStreams: cfg.MaxStreams, MaxSpectatorStreams: cfg.MaxSpectatorStreams, MaxSeatStreams: cfg.MaxSeatStreams, PresenceGrace: cfg.PresenceGrace, PresenceLease: cfg.PresenceLease, AIJobs: jobs,
			ServiceKeys: rt.ServiceKeys,
		}, st, idx, h, ring, rt.Tel.Meter.Meter("palace/game"))
		if err != nil {
			_ = h.Close()
			return nil, err
		}
		rt.Server.RegisterService(&gamev1.GameService_ServiceDesc, hd)
		return func() error {
			hd.Close(context.WithoutCancel(ctx))
			return h.Close()
		}, nil
	}
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
