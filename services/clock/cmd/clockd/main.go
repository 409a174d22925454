// Command clockd runs the clock service alone, for scale-out deployments.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/services/clock"
)

func main() {
	ctx, stop := app.SignalContext()
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "clockd:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("clockd", flag.ContinueOnError)
	var cfg app.Config
	cfg.RegisterFlags(fs, "localhost:8083")
	var svc clock.Config
	svc.RegisterFlags(fs)
	if err := app.ParseFlags(fs, args); err != nil {
		return err
	}
	return app.Run(ctx, app.Options{Name: "clock", Config: cfg, OwnsProcess: true, Services: []app.Binder{clock.Bind(svc)}, Checks: []func() error{cfg.CallsGameService(svc.GameAddr, ": the game service's host:port"), svc.Validate}})
}
