package main

import (
	"strings"
	"testing"
	"time"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestTheLoadToolLeavesAPartitionedReplica: one of two replicas is cut
// off by a partition that leaves its TCP connections half-open (Freeze:
// no data, no error), as a crashed host or a network split does; new
// connections still pass. The tool's calls there outlive --call-timeout
// and move to the other replica; its streams there hear no heartbeat
// (the servers beat every 500 ms), and once silent past --stream-silence
// must move too and resume there, as a client that hears nothing for
// much longer than the heartbeat interval does. The run must be clean,
// as it is when the replica is killed, not end each game watched there
// as an error, its streams never failed over nor checked whole.
func TestTheLoadToolLeavesAPartitionedReplica(t *testing.T) {
	shared := []string{"--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
		"--seat-signing-keys", "k1:" + strings.Repeat("5e", 32), "--heartbeat", "500ms"}
	a, b := startServe(t, shared...), startServe(t, shared...)
	toA := redistest.NewProxy(t, a)
	start := time.Now()
	out, errOut, code := palaceUnderFaults(1500*time.Millisecond, toA.Freeze, "loadtest", "games", "--addr", toA.Addr()+","+b,
		"--games", "4", "--duration", "3s", "--floor=false", "--retry-rate", "0.1", "--reconnect-rate", "0", "--call-timeout", "500ms",
		"--stream-silence", "2s")
	var rep gamesReport
	lastJSON(t, out, &rep)
	t.Logf("took %v; exit %d; report %+v", time.Since(start).Round(time.Second), code, rep)
	if rep.Moves == 0 || rep.Failovers == 0 {
		t.Fatalf("no failover exercised: %+v\n%s", rep, errOut)
	}
	if code != exitOK || rep.Lost+rep.Duplicated+rep.Gaps+rep.Errors != 0 {
		t.Fatalf("a partitioned replica of two: exit %d, lost %d duplicated %d gaps %d errors %d; want a clean run\n%s",
			code, rep.Lost, rep.Duplicated, rep.Gaps, rep.Errors, errOut)
	}
}

// TestTheLoadToolCatchesMissingHeartbeats: the server beats every 100 ms
// of silence, and games pause 500 ms on average between moves, so every
// stream is owed heartbeats, and one at once when it resumes at the
// game's version. A proxy that drops every heartbeat, so that no client
// could tell a dead connection from a quiet game, must be noticed: with
// one replica, a stream silent past --stream-silence is an error.
func TestTheLoadToolCatchesMissingHeartbeats(t *testing.T) {
	upstream := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
		"--heartbeat", "100ms")
	f := dropEvents(func(m *gamev1.StreamEventsResponse) bool { return m.GetHeartbeat() != nil })
	rep, errOut, code := gamesThrough(t, upstream, f, "--duration", "2s", "--think", "500ms", "--stream-silence", "400ms")
	wantFaultCounted(t, f, rep, errOut, code)
}
