package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/apptest"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestGamesRideOutARedisRestart: the only Redis (appendonly yes,
// appendfsync always) is stopped under load, by SIGTERM or SIGKILL, and
// started again a second later on the same port and files. Every move the
// server acknowledged was fsynced before its answer: with
// --retry-unavailable the games load test finds nothing lost, doubled or
// skipped, and no error.
func TestGamesRideOutARedisRestart(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			r := redistest.Own(t)
			addr := startServe(t, "--redis-addr", r.Addr, "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
			rep, errOut, code := playGamesUnderFaults(t, 4*time.Second, func() {
				stopRedis(r, sig)
				time.Sleep(time.Second)
				restartRedis(t, r)
			}, "--addr", addr, "--games", "100", "--duration", "12s", "--retry-rate", "0.1", "--reconnect-rate", "0.05", "--retry-unavailable")
			wantGamesWhole(t, "after a Redis %v and restart", rep, code, errOut, "")
		})
	}
}

// TestClocksRideOutARedisRestart: Redis is killed (SIGKILL) for 2 s
// while clocks run out; deadlines fall due while it is down. Once it is
// back each game is still flagged, once, on time (the outage excused to
// the turn it fell in), and no move answered is lost.
func TestClocksRideOutARedisRestart(t *testing.T) {
	r := redistest.Own(t)
	addr := startServe(t, "--redis-addr", r.Addr, "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	out, errOut, code := palaceUnderFaults(2500*time.Millisecond, func() {
		r.Kill()
		time.Sleep(2 * time.Second)
		restartRedis(t, r)
	}, "loadtest", "clocks", "--addr", addr, "--games", "24", "--spread", "3s",
		"--min-time", "2s", "--max-time", "2s", "--early", "0.3", "--racing", "0.4", "--byoyomi", "0.5",
		"--check-after", "3s", "--timeout", "60s")
	wantClocksFlagged(t, "clocks across a Redis SIGKILL and restart", out, errOut, code, 24, "")
}

// TestServeStoppedDuringARedisOutageExitsCleanly: a stop while Redis was
// away made palace serve exit 1 with a bare stderr line (the clock's lease
// release failed at once), where a closing that hangs is warned of and the
// stop is clean. What the process held is left as after a crash, for other
// replicas to take over, in both cases.
func TestServeStoppedDuringARedisOutageExitsCleanly(t *testing.T) {
	srv := redistest.Own(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs apptest.LogBuffer
	addrc := make(chan string, 1)
	done := make(chan int, 1)
	go func() {
		done <- serve(ctx, []string{"--listen", "127.0.0.1:0", "--log-level", "warn", "--redis-addr", srv.Addr}, &logs,
			serveOptions{onServing: func(a string) { addrc <- a }})
	}()
	select {
	case <-addrc:
	case code := <-done:
		t.Fatalf("exited %d before serving: %s", code, logs.String())
	case <-time.After(20 * time.Second):
		t.Fatal("did not start")
	}
	time.Sleep(500 * time.Millisecond)
	srv.Kill()
	time.Sleep(2 * time.Second)
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("palace serve stopped during a Redis outage exited %d; last lines:\n%s", code, tail(logs.String(), 4))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("did not stop")
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
