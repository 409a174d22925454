package main

import (
	"strings"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/redistest"
)

// TestLoadtestClocksFlagsEveryGame runs a small clock load test against
// `palace serve` on a real Redis: every game must end on time exactly
// when it should, whatever its players did.
func TestLoadtestClocksFlagsEveryGame(t *testing.T) {
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	out, errOut, code := palace("loadtest", "clocks", "--addr", addr, "--games", "30", "--spread", "2s",
		"--min-time", "2s", "--max-time", "3s", "--early", "0.3", "--racing", "0.4", "--byoyomi", "0.5")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep clocksReport
	lastJSON(t, out, &rep)
	if rep.Games != 30 || rep.Idle+rep.Early+rep.Racing != 30 || rep.Early == 0 || rep.Racing == 0 {
		t.Fatalf("not every game or behaviour ran: %+v", rep)
	}
	// Every game ends on time: the idle ones, the refused racing ones
	// (first side) and those whose move stood (second side, never moving).
	if rep.Flagged != 30 || rep.Checked != 30 || rep.Missed != 0 || rep.WronglyFlagged != 0 || rep.Inconsistent != 0 || rep.Unexpected != 0 || rep.Errors != 0 {
		t.Fatalf("load test found faults: %+v\n%s", rep, errOut)
	}
	if rep.RaceInTime+rep.RaceLate != rep.Racing {
		t.Fatalf("racing moves unaccounted for: %+v", rep)
	}
	if !strings.Contains(errOut, "progress:") {
		t.Fatalf("no progress line on stderr: %s", errOut)
	}
}

func TestLoadtestClocksRefusesBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{name: "no games", args: []string{"--games", "0"}},
		{name: "budget below 2s", args: []string{"--min-time", "1s"}},
		{name: "max below min", args: []string{"--min-time", "5s", "--max-time", "3s"}},
		{name: "shares above one", args: []string{"--early", "0.7", "--racing", "0.5"}},
		{name: "race window wider than half the budget", args: []string{"--race-before", "2s"}},
		// The server credits a report over a minute nothing: racing moves
		// would race another deadline than the tool judges them by.
		{name: "a reported lag the server credits nothing", args: []string{"--reported-lag", "61s"}},
		{name: "a negative reported lag", args: []string{"--reported-lag", "-1s"}},
		// NaN passes every range check.
		{name: "a share that is not a number", args: []string{"--racing", "NaN"}},
		{name: "unknown flag", args: []string{"--nope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := palace(append([]string{"loadtest", "clocks", "--addr", "127.0.0.1:1"}, tt.args...)...)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d: %s", code, exitUsage, errOut)
			}
		})
	}
}

// TestClocksReportFaulty: the exit status reports every fault the report
// shows, failed calls, unexpected endings and games never checked
// included, not only the clock's own misses.
func TestClocksReportFaulty(t *testing.T) {
	good := clocksReport{Games: 10, Checked: 10, Flagged: 10}
	tests := []struct {
		name string
		edit func(*clocksReport)
		want bool
	}{
		{name: "all flagged", edit: func(*clocksReport) {}, want: false},
		{name: "missed", edit: func(r *clocksReport) { r.Missed = 1 }, want: true},
		{name: "wrongly flagged", edit: func(r *clocksReport) { r.WronglyFlagged = 1 }, want: true},
		{name: "inconsistent", edit: func(r *clocksReport) { r.Inconsistent = 1 }, want: true},
		{name: "unexpected ending", edit: func(r *clocksReport) { r.Unexpected = 1 }, want: true},
		{name: "errors", edit: func(r *clocksReport) { r.Errors = 1 }, want: true},
		{name: "a game never checked", edit: func(r *clocksReport) { r.Checked = 9 }, want: true},
		{name: "nothing checked", edit: func(r *clocksReport) { r.Checked, r.Flagged = 0, 0 }, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := good
			tt.edit(&r)
			if got := r.faulty(); got != tt.want {
				t.Fatalf("faulty() = %v for %+v, want %v", got, r, tt.want)
			}
		})
	}
}

// TestLoadtestClocksExitsOneWhenNothingChecked: a run whose --timeout
// ends before any game could be checked showed nothing, and says so.
func TestLoadtestClocksExitsOneWhenNothingChecked(t *testing.T) {
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	// The clocks start over 10 minutes: none has flagged after 2s.
	out, errOut, code := palace("loadtest", "clocks", "--addr", addr, "--games", "4", "--spread", "10m",
		"--min-time", "2s", "--max-time", "2s", "--timeout", "2s")
	var rep clocksReport
	lastJSON(t, out, &rep)
	if code != exitFail || rep.Games != 4 || rep.Checked != 0 {
		t.Fatalf("exit %d with report %+v, want %d and 4 games, none checked:\n%s", code, rep, exitFail, errOut)
	}
	if !strings.Contains(errOut, "never checked") {
		t.Fatalf("stderr does not say games went unchecked:\n%s", errOut)
	}
}

// TestLoadtestClocksExitsOneWhenTheServerStops: calls failing because
// the server went away for good are faults once the tool gives up sending
// them again (after about 13 s, or at --timeout), even though no clock was
// seen to fail.
func TestLoadtestClocksExitsOneWhenTheServerStops(t *testing.T) {
	addr, stop := startServeStoppable(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	// Stop the server while clocks are still to start.
	out, errOut, code := palaceUnderFaults(1500*time.Millisecond, stop, "loadtest", "clocks", "--addr", addr, "--games", "8", "--spread", "3s",
		"--min-time", "2s", "--max-time", "2s", "--check-after", "200ms", "--call-timeout", "2s", "--timeout", "15s")
	var rep clocksReport
	lastJSON(t, out, &rep)
	if code != exitFail || rep.Errors == 0 {
		t.Fatalf("exit %d with report %+v, want %d and errors:\n%s", code, rep, exitFail, errOut)
	}
	if rep.Missed != 0 || rep.WronglyFlagged != 0 || rep.Inconsistent != 0 {
		t.Fatalf("the clock faults alone would fail the run, proving nothing: %+v", rep)
	}
}

// TestLoadtestClocksRidesOutUnavailableReplicas: while clocks start and
// run, the tool's connection to the game service is cut for a second (as a
// replica killed and restarted, or a network fault, looks to it), or one
// of two replicas is stopped. The tool sends its calls again, with the
// same request ids, to the replica it has or to the next, as an app
// would: no error, each call sent again counted as a retry, and every
// game still judged as it should be, its moves by the answers the game
// service kept for them.
func TestLoadtestClocksRidesOutUnavailableReplicas(t *testing.T) {
	tests := []struct {
		name string
		// start returns the tool's --addr and the fault it suffers.
		start func(t *testing.T, shared []string) (addr string, fault func())
		// checkAfter is the tool's --check-after.
		checkAfter string
	}{
		{name: "connection cut", checkAfter: "2s", start: func(t *testing.T, shared []string) (string, func()) {
			toA := redistest.NewProxy(t, startServe(t, shared...))
			return toA.Addr(), func() {
				toA.Cut()
				time.Sleep(time.Second)
				toA.Restore()
			}
		}},
		// Above a clock replica's hand-over, should the stopped replica's
		// clock service have held the shards.
		{name: "replica stopped", checkAfter: "5s", start: func(t *testing.T, shared []string) (string, func()) {
			a := startServe(t, shared...)
			b, stopB := startServeStoppable(t, shared...)
			return a + "," + b, stopB
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Either replica must accept the seat credentials the other
			// signed.
			shared := []string{"--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
				"--seat-signing-keys", "k1:" + strings.Repeat("5e", 32)}
			addr, fault := tt.start(t, shared)
			// The clocks start from about 0.5 s in, over 3 s.
			out, errOut, code := palaceUnderFaults(1500*time.Millisecond, fault, "loadtest", "clocks", "--addr", addr, "--games", "24", "--spread", "3s",
				"--min-time", "2s", "--max-time", "2s", "--early", "0.3", "--racing", "0.4", "--byoyomi", "0.5",
				"--check-after", tt.checkAfter, "--timeout", "60s")
			var rep clocksReport
			lastJSON(t, out, &rep)
			t.Logf("report %+v", rep)
			if code != exitOK || rep.Errors != 0 || rep.Retries == 0 {
				t.Fatalf("exit %d, report %+v; want exit 0, no error and retries\n%s", code, rep, errOut)
			}
			if rep.Checked != 24 || rep.Flagged != 24 || rep.Missed+rep.WronglyFlagged+rep.Inconsistent+rep.Unexpected != 0 ||
				rep.RaceInTime+rep.RaceLate != rep.Racing {
				t.Fatalf("games judged otherwise than flagged on time: %+v\n%s", rep, errOut)
			}
		})
	}
}
