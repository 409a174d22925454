// Command aid runs the ai service alone, for scale-out deployments.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/services/ai"
)

func main() {
	ctx, stop := app.SignalContext()
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "aid:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("aid", flag.ContinueOnError)
	var cfg app.Config
	cfg.RegisterFlags(fs, "localhost:8085")
	var svc ai.Config
	svc.RegisterFlags(fs, 1)
	fs.Lookup("game-addr").Usage = "game service host:port, which the workers play through (required unless --ai-workers is 0) (env PALACE_GAME_ADDR)"
	if err := app.ParseFlags(fs, args); err != nil {
		return err
	}
	checks := []func() error{svc.Validate}
	if svc.Workers > 0 {
		// Without workers, only the analysis API: no game service called.
		checks = append([]func() error{cfg.CallsGameService(svc.GameAddr, " with --ai-workers above 0: the workers play through the game service")}, checks...)
	}
	return app.Run(ctx, app.Options{Name: "ai", Config: cfg, OwnsProcess: true, Services: []app.Binder{ai.Bind(svc)}, Checks: checks})
}
