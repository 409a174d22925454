package main

import (
	"context"
	"strings"
	"testing"
)

// TestRunNeedsTheGameService: without --game-addr the daemon would call
// itself for the game service, and fail every call while looking healthy.
func TestRunNeedsTheGameService(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := run(ctx, []string{"--listen", "127.0.0.1:0", "--redis-addr", "127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "--game-addr") {
		t.Fatalf("run without --game-addr: %v, want an error naming --game-addr", err)
	}
}

// TestRunNamesARefusedEnvironmentValue: PALACE_AI_WORKERS=" 0", refused
// by its parser, left the default of one worker, and the daemon stopped on
// its --game-addr check, telling an operator who meant no workers to add a
// game address "with --ai-workers above 0". The refused variable is named
// first.
func TestRunNamesARefusedEnvironmentValue(t *testing.T) {
	t.Setenv("PALACE_AI_WORKERS", " 0")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := run(ctx, []string{"--listen", "127.0.0.1:0", "--redis-addr", "127.0.0.1:1", "--redis-wait", "0s"})
	if err == nil || !strings.Contains(err.Error(), "PALACE_AI_WORKERS") {
		t.Fatalf("aid with PALACE_AI_WORKERS=\" 0\": %v; want an error naming PALACE_AI_WORKERS", err)
	}
}

// A missing --game-addr was reported alone, checked before the other
// flags: those were named only once it was given.
func TestRunNamesAMissingGameServiceBesideOtherBadFlags(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := run(ctx, []string{"--listen", "127.0.0.1:0", "--redis-addr", "127.0.0.1:1", "--redis-wait", "0s",
		"--ai-engines", "0", "--log-level", "bogus"})
	for _, flag := range []string{"--game-addr", "--ai-engines", "--log-level"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("aid with several bad flags: %v\nwant %s named too", err, flag)
		}
	}
}
