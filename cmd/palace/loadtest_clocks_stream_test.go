package main

import (
	"testing"

	"github.com/palacehq/palace/pkg/apptest"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestLoadtestClocksFindsAStreamEndingAnotherGame: every game's event stream
// tells its end with the other side winning (the flagged side as winner).
// An app watching the stream is told the wrong winner of every timeout:
// the tool compares the stream's end with the game it read.
func TestLoadtestClocksFindsAStreamEndingAnotherGame(t *testing.T) {
	upstream := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	f := flipEndedWinner()
	addr := startFaultyProxy(t, upstream, f)
	out, errOut, code := palace("loadtest", "clocks", "--addr", addr, "--games", "6", "--spread", "1s",
		"--min-time", "2s", "--max-time", "2s", "--service-keys", apptest.ServiceKeys)
	var rep clocksReport
	lastJSON(t, out, &rep)
	if f.injected.Load() == 0 || code == exitOK {
		t.Fatalf("%d streamed ends with the other winner read by the tool; report %+v, exit %d; want exit %d\n%s", f.injected.Load(), rep, code, exitFail, errOut)
	}
}
