package main

import (
	"strings"
	"testing"
)

// TestLoadtestAIBacksOffOnErrors: against a dead address the AI load
// test pauses after each failed call instead of retrying at once, and
// prints only the first errors, then how many more there were; it still
// exits 1.
func TestLoadtestAIBacksOffOnErrors(t *testing.T) {
	out, errOut, code := palace("loadtest", "ai", "--addr", "127.0.0.1:1", "--level", "1", "--clients", "2", "--duration", "1s")
	var rep aiReport
	lastJSON(t, out, &rep)
	if code != exitFail || rep.Errors == 0 {
		t.Fatalf("exit %d with report %+v, want %d and errors", code, rep, exitFail)
	}
	// 2 clients for 1s, pausing at least 50ms after each failure.
	if rep.Errors > 2*(1000/50)+2 {
		t.Errorf("%d failed calls in 1s from 2 clients: no back-off", rep.Errors)
	}
	// The first errors, then one line counting the others.
	if lines := strings.Count(errOut, "\n"); lines > aiErrorsShown+1 {
		t.Errorf("%d lines on stderr, want at most %d:\n%.2000s", lines, aiErrorsShown+1, errOut)
	}
	if rep.Errors > aiErrorsShown && !strings.Contains(errOut, "more not shown") {
		t.Errorf("%d errors but no count of those not shown:\n%s", rep.Errors, errOut)
	}
}
