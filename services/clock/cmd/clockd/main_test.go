package main

import (
	"context"
	"strings"
	"testing"
	"time"
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

// TestABadPeerTLSIsNamedBesideOtherBadFlags: clockd calls the game
// service with --peer-tls; one naming no readable CA file was named
// neither beside another bad flag nor before Redis was reached.
func TestABadPeerTLSIsNamedBesideOtherBadFlags(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := run(ctx, []string{"--listen", "127.0.0.1:0", "--redis-addr", "127.0.0.1:1", "--redis-wait", "0s", "--game-addr", "127.0.0.1:1", "--log-level", "error",
		"--peer-tls", "/nonexistent/ca.pem", "--clock-batch", "0"})
	for _, flag := range []string{"--clock-batch", "--peer-tls"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("clockd with a bad --peer-tls and a bad --clock-batch: %v\nwant %s named", err, flag)
		}
	}
}
