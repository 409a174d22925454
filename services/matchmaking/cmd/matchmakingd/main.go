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
	return app.Run(ctx, app.Options{Name: "matchmaking", Config: cfg, OwnsProcess: true, Services: []app.Binder{matchmaking.Bind(svc)}, Checks: []func() error{cfg.CallsGameService(svc.GameAddr, ": the game service's host:port"), svc.Validate},
		SigningKeys: map[string]string{"player-signing-keys": svc.SigningKeys}})
}
