// Command matchmakingd runs the matchmaking service alone, for scale-out deployments.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/services/matchmaking"
)

func main() {
	ctx, stop := app.SignalContext()
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "matchmakingd:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("matchmakingd", flag.ContinueOnError)
	var cfg app.Config
	cfg.RegisterFlags(fs, "localhost:8084")
	var svc matchmaking.Config
	svc.RegisterFlags(fs)
	if err := app.ParseFlags(fs, args); err != nil {
		return err
	}
	// Empty, it would mean this process, which does not serve games:
	// every call would fail while the process looked healthy.
	needsGameAddr := func() error {
		if svc.GameAddr == "" {
			return errors.New("--game-addr (PALACE_GAME_ADDR) is required: the game service's host:port, which this process does not run (palace serve runs every service in one process)")
		}
		return nil
	}
	return app.Run(ctx, app.Options{Name: "matchmaking", Config: cfg, OwnsProcess: true, Services: []app.Binder{matchmaking.Bind(svc)}, Checks: []func() error{needsGameAddr, svc.Validate},
		SigningKeys: map[string]string{"player-signing-keys": svc.SigningKeys}})
}
