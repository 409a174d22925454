package main

import (
	"strings"
	"testing"

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
	if rep.Flagged != 30 || rep.Missed != 0 || rep.WronglyFlagged != 0 || rep.Inconsistent != 0 || rep.Unexpected != 0 || rep.Errors != 0 {
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
