package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/redistest"
)

func replicaFlags(t *testing.T) []string {
	return []string{"--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
		"--seat-signing-keys", "k1:" + strings.Repeat("5e", 32)}
}

// TestGamesRideOutAReplicaSIGKILLedAndRestarted: two palace serve
// processes on one Redis; one is killed (SIGKILL: no drain, no lease
// released, its streams and calls in flight cut) under load and started
// again two seconds later. The load tool moves its clients to the other
// replica and back: nothing lost, doubled or skipped, and no error.
func TestGamesRideOutAReplicaSIGKILLedAndRestarted(t *testing.T) {
	shared := replicaFlags(t)
	a, b := startServeProc(t, shared...), startServeProc(t, shared...)
	rep, errOut, code := playGamesUnderFaults(t, 4*time.Second, func() {
		b.Signal(syscall.SIGKILL)
		time.Sleep(2 * time.Second)
		b.Start()
	}, "--addr", a.Addr+","+b.Addr, "--games", "100", "--duration", "12s", "--retry-rate", "0.1", "--reconnect-rate", "0.05")
	wantGamesWhole(t, "a replica SIGKILLed and restarted", rep, code, errOut, b.Logs())
}

// TestClocksRideOutAReplicaSIGKILLed: while clocks run out, one of
// two palace serve processes (each with its clock sweepers) is killed
// without releasing its shard leases, and started again later. Every
// game, the killed one's shards' too, and those whose players were
// never connected again, is flagged once on time, within --check-after
// above the documented hand-over (about 4 s).
func TestClocksRideOutAReplicaSIGKILLed(t *testing.T) {
	shared := replicaFlags(t)
	a, b := startServeProc(t, shared...), startServeProc(t, shared...)
	// Flags fall due from about 2.5 s to 8.5 s; b dies at 3 s.
	out, errOut, code := palaceUnderFaults(3*time.Second, func() {
		b.Signal(syscall.SIGKILL)
		time.Sleep(3 * time.Second)
		b.Start()
	}, "loadtest", "clocks", "--addr", a.Addr+","+b.Addr, "--games", "40", "--spread", "6s",
		"--min-time", "2s", "--max-time", "2s", "--early", "0.3", "--racing", "0.4", "--byoyomi", "0.5",
		"--check-after", "5s", "--timeout", "60s")
	rep := wantClocksFlagged(t, "clocks across a replica SIGKILL", out, errOut, code, 40, b.Logs())
	// A dead replica's deadlines wait its leases out (--clock-lease-ttl,
	// 500 ms) and a tick: not the seconds of a hand-over.
	if rep.MaxMs > 2000 {
		t.Fatalf("a flag came %.0f ms late after a clock replica died; want within its lease (500 ms) and a tick", rep.MaxMs)
	}
}
