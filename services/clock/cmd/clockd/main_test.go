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

// A missing --game-addr was reported alone, checked before the other
// flags: those were named only once it was given.
func TestRunNamesAMissingGameServiceBesideOtherBadFlags(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := run(ctx, []string{"--listen", "127.0.0.1:0", "--redis-addr", "127.0.0.1:1", "--redis-wait", "0s",
		"--deadline-shards", "0", "--clock-workers", "0", "--log-level", "bogus"})
	for _, flag := range []string{"--game-addr", "--deadline-shards", "--clock-workers", "--log-level"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("clockd with several bad flags: %v\nwant %s named too", err, flag)
		}
	}
}
