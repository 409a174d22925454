// Command gamed runs the game service alone, for scale-out deployments.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/services/game"
)

func main() {
	ctx, stop := app.SignalContext()
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "gamed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("gamed", flag.ContinueOnError)
	var cfg app.Config
	cfg.RegisterFlags(fs, "localhost:8082")
	var svc game.Config
	svc.RegisterFlags(fs)

	if err := app.ParseFlags(fs, args); err != nil {
		return err
	}
	return app.Run(ctx, app.Options{Name: "game", Config: cfg, OwnsProcess: true, Services: []app.Binder{game.Bind(svc)}, Checks: []func() error{svc.Validate},
		SigningKeys: map[string]string{"seat-signing-keys": svc.SigningKeys}})
}
