// Command rulesd runs the rules service alone, for scale-out deployments.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/services/rules"
)

func main() {
	ctx, stop := app.SignalContext()
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "rulesd:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("rulesd", flag.ContinueOnError)
	cfg := app.Config{NoRedis: true, NoPeers: true}
	cfg.RegisterFlags(fs, "localhost:8081")

	if err := app.ParseFlags(fs, args); err != nil {
		return err
	}
	return app.Run(ctx, app.Options{Name: "rules", Config: cfg, OwnsProcess: true, Services: []app.Binder{rules.Bind()}})
}
