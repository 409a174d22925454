package app

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// SignalContext is cancelled by the first SIGINT or SIGTERM, which starts
// a graceful stop. The signals get their default action back before the
// context ends, so a second one ends the process at once: an operator (or
// a supervisor that signals twice) need not wait out --shutdown-timeout
// for calls that will not finish. Call stop when done.
func SignalContext() (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sig:
		case <-ctx.Done():
		}
		signal.Stop(sig)
		cancel()
	}()
	return ctx, cancel
}
