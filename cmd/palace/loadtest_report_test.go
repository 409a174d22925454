package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/palacehq/palace/pkg/redistest"
)

// bothOutputs runs palace with stdout and stderr going to one writer, as a
// terminal, `2>&1`, a CI log or `docker logs` shows them.
func bothOutputs(args ...string) (string, int) {
	var both bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &both, &both)
	return both.String(), code
}

// TestAFaultyClocksRunEndsOnItsReport: the report is the last line of a
// run even with both outputs together. "N of M games were never checked"
// once came after it, on exactly the runs a script must see the faults
// of (`2>&1 | tail -n1 | jq`).
func TestAFaultyClocksRunEndsOnItsReport(t *testing.T) {
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	// The clocks start over 10 minutes: none is checked by the timeout.
	out, code := bothOutputs("loadtest", "clocks", "--addr", addr, "--games", "4", "--spread", "10m",
		"--min-time", "2s", "--max-time", "2s", "--timeout", "2s")
	var rep clocksReport
	lastJSON(t, out, &rep)
	if code != exitFail || rep.Checked != 0 || !strings.Contains(out, "4 of 4 games were never checked") {
		t.Fatalf("exit %d, report %+v; want %d and the unchecked games told:\n%s", code, rep, exitFail, out)
	}
}

// TestAFaultyMatchmakingRunEndsOnItsReport: likewise "N of M tickets
// neither matched nor waiting" came after the report.
func TestAFaultyMatchmakingRunEndsOnItsReport(t *testing.T) {
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	out, code := bothOutputs("loadtest", "matchmaking", "--addr", addr, "--tickets", "20", "--cancel", "0", "--timeout", "1ns")
	var rep mmReport
	lastJSON(t, out, &rep)
	if code != exitFail || rep.Unsettled == 0 || !strings.Contains(out, "neither matched nor waiting") {
		t.Fatalf("exit %d, report %+v; want %d and the unsettled tickets told:\n%s", code, rep, exitFail, out)
	}
}

// TestAClocksRunCreatingNoGameReportsItsErrors: a run whose every game
// was refused (service keys the server does not know) printed no report
// at all, where the games tool reports such refusals as errors.
func TestAClocksRunCreatingNoGameReportsItsErrors(t *testing.T) {
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	otherKeys := "other:" + strings.Repeat("5a", 32)
	out, errOut, code := palace("loadtest", "clocks", "--addr", addr, "--games", "2", "--spread", "1s", "--service-keys", otherKeys)
	var rep clocksReport
	lastJSON(t, out, &rep)
	if code != exitFail || rep.Games != 0 || rep.Errors == 0 {
		t.Fatalf("exit %d, report %+v; want %d with the refused creations as errors:\n%s", code, rep, exitFail, errOut)
	}
}
