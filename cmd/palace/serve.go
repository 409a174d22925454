package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/services/ai"
	"github.com/palacehq/palace/services/clock"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/matchmaking"
	"github.com/palacehq/palace/services/rules"
)

// serveOptions lets tests learn the address of a server listening on
// port 0.
type serveOptions struct {
	onServing func(addr string)
}

func runServe(ctx context.Context, args []string, stderr io.Writer) int {
	return serve(ctx, args, stderr, serveOptions{})
}

func serve(ctx context.Context, args []string, stderr io.Writer, so serveOptions) int {
	fs := flag.NewFlagSet("palace serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := app.Config{EmbeddedRedis: true, NoPeers: true}
	cfg.RegisterFlags(fs, "localhost:8080")
	// The game service defines the flags the other services share with it
	// (--key-prefix, --deadline-shards, the wait for Redis replicas); they
	// take its values. They reach it through this process's own port, so
	// there is no --game-addr.
	var gm game.Config
	gm.RegisterFlags(fs)
	var ck clock.Config
	ck.RegisterOwnFlags(fs)
	var mm matchmaking.Config
	mm.RegisterOwnFlags(fs)
	var aic ai.Config
	aic.RegisterOwnFlags(fs, 1)
	// Values refused are named with every other bad flag, by Validate.
	parsed := app.DeferValueErrors(fs)
	code, ok := parseFlags(fs, args, stderr)
	parsed()
	if !ok {
		return code
	}
	ck.KeyPrefix, ck.DeadlineShards = gm.KeyPrefix, gm.DeadlineShards
	mm.KeyPrefix, mm.WaitReplicas, mm.WaitTimeout = gm.KeyPrefix, gm.WaitReplicas, gm.WaitTimeout
	aic.KeyPrefix = gm.KeyPrefix
	err := app.Run(ctx, app.Options{
		Name:   "palace",
		Config: cfg,
		// Every service binds exactly as its own daemon does; peers are
		// reached through this process's own port.
		Services: []app.Binder{
			rules.Bind(),
			game.Bind(gm),
			clock.Bind(ck),
			matchmaking.Bind(mm),
			ai.Bind(aic),
		},
		Checks:      []func() error{gm.Validate, ck.Validate, mm.Validate, aic.Validate, embeddedRedisHasNoReplicas(cfg, gm)},
		SigningKeys: map[string]string{"seat-signing-keys": gm.SigningKeys, "player-signing-keys": mm.SigningKeys},
		LogOutput:   stderr,
		OnServing:   so.onServing,
		OwnsProcess: true,
	})
	if err != nil {
		fmt.Fprintln(stderr, "palace serve:", err)
		return exitFail
	}
	return exitOK
}

// embeddedRedisHasNoReplicas refuses a wait for Redis replicas with the
// in-process Redis, which never has any: every write would wait for them
// and fail Unavailable, while the process reported itself healthy.
func embeddedRedisHasNoReplicas(cfg app.Config, gm game.Config) func() error {
	return func() error {
		if cfg.RedisAddr == "" && gm.WaitReplicas > 0 {
			return fmt.Errorf("--redis-wait-replicas %d needs a Redis with replicas (--redis-addr): the in-process Redis has none, so every write would fail", gm.WaitReplicas)
		}
		return nil
	}
}
