package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/redistest"
)

// TestClocksRideOutAWholeRestart: the machine running both Redis
// (appendfsync always) and the only palace serve dies (both SIGKILLed)
// while clocks run out, and both come back 2 s later, Redis first.
// Deadlines fell due while nothing ran: no player could move, so each
// turn is excused the outage (OUTAGE_EXCUSED) and flagged later, once,
// on time; no game is missed or flagged wrongly, no move answered lost.
func TestClocksRideOutAWholeRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		redis bool
	}{{"palace-and-redis", true}, {"palace-alone", false}} {
		t.Run(tc.name, func(t *testing.T) {
			var redisAddr string
			var r *redistest.Server
			if tc.redis {
				r = redistest.Own(t)
				redisAddr = r.Addr
			} else {
				redisAddr = redistest.Addr(t)
			}
			p := startServeProc(t, "--redis-addr", redisAddr, "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
				"--seat-signing-keys", "k1:"+strings.Repeat("5e", 32))
			out, errOut, code := palaceUnderFaults(2500*time.Millisecond, func() {
				if r != nil {
					r.Kill()
				}
				p.Signal(syscall.SIGKILL)
				time.Sleep(2 * time.Second)
				if r != nil {
					restartRedis(t, r)
				}
				p.Start()
			}, "loadtest", "clocks", "--addr", p.Addr, "--games", "24", "--spread", "3s",
				"--min-time", "2s", "--max-time", "2s", "--early", "0.3", "--racing", "0.4", "--byoyomi", "0.5",
				"--check-after", "5s", "--timeout", "60s")
			wantClocksFlagged(t, "clocks across a whole restart", out, errOut, code, 24, p.Logs())
		})
	}
}

// TestGamesRideOutAWholeRestart: the only palace serve, and with it
// its Redis (appendfsync always), die by SIGKILL under load and come back
// 2 s later. Every acknowledged move was fsynced: with
// --retry-unavailable the games load test finds nothing lost, doubled or
// skipped, and no error.
func TestGamesRideOutAWholeRestart(t *testing.T) {
	for _, withRedis := range []bool{false, true} {
		name := "palace-alone"
		if withRedis {
			name = "palace-and-redis"
		}
		t.Run(name, func(t *testing.T) {
			redisAddr := redistest.Addr(t)
			var r *redistest.Server
			if withRedis {
				r = redistest.Own(t)
				redisAddr = r.Addr
			}
			p := startServeProc(t, "--redis-addr", redisAddr, "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
				"--seat-signing-keys", "k1:"+strings.Repeat("5e", 32))
			rep, errOut, code := playGamesUnderFaults(t, 4*time.Second, func() {
				p.Signal(syscall.SIGKILL)
				if r != nil {
					r.Kill()
					time.Sleep(time.Second)
					restartRedis(t, r)
				}
				time.Sleep(time.Second)
				p.Start()
			}, "--addr", p.Addr, "--games", "100", "--duration", "14s", "--retry-rate", "0.1", "--reconnect-rate", "0.05", "--retry-unavailable")
			wantGamesWhole(t, "a whole restart", rep, code, errOut, p.Logs())
		})
	}
}
