package main

import (
	"context"
	"net"
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

// TestBadPlayerKeysAreReportedBeforeWaitingForRedis: a malformed player
// key is reported at once, naming its flag, not hidden behind a Redis out
// of reach until --redis-wait has passed.
func TestBadPlayerKeysAreReportedBeforeWaitingForRedis(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	begun := time.Now()
	err = run(ctx, []string{"--listen", "127.0.0.1:0", "--redis-addr", dead, "--redis-wait", "1m", "--game-addr", "127.0.0.1:1", "--log-level", "error",
		"--player-signing-keys", "k1:00ff"})
	if err == nil || !strings.Contains(err.Error(), "--player-signing-keys") {
		t.Fatalf("matchmakingd with a short player key, Redis out of reach: after %v: %v; want --player-signing-keys named at once", time.Since(begun).Round(100*time.Millisecond), err)
	}
}

// A missing --game-addr was reported alone, checked before the other
// flags: those were named only once it was given.
func TestRunNamesAMissingGameServiceBesideOtherBadFlags(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := run(ctx, []string{"--listen", "127.0.0.1:0", "--redis-addr", "127.0.0.1:1", "--redis-wait", "0s",
		"--ticket-ttl", "-1s", "--log-level", "bogus"})
	for _, flag := range []string{"--game-addr", "--ticket-ttl", "--log-level"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("matchmakingd with several bad flags: %v\nwant %s named too", err, flag)
		}
	}
}
