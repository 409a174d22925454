package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/palacehq/palace/pkg/redistest"
)

func lastJSON(t *testing.T, out string, v any) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), v); err != nil {
		t.Fatalf("last line %q is not the JSON report: %v", lines[len(lines)-1], err)
	}
}

// TestLoadtestGamesFindsNothingWrong runs a short load test against a real
// server on a real Redis: every move acknowledged must be in the final
// state and in both seats' streams exactly once.
func TestLoadtestGamesFindsNothingWrong(t *testing.T) {
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	out, errOut, code := palace("loadtest", "games", "--addr", addr, "--games", "6", "--duration", "2s", "--warmup", "500ms", "--retry-rate", "0.3", "--reconnect-rate", "0.2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep gamesReport
	lastJSON(t, out, &rep)
	if rep.Moves == 0 || rep.Games < 6 || rep.FloorPerS == 0 {
		t.Fatalf("nothing measured: %+v", rep)
	}
	if rep.Lost != 0 || rep.Duplicated != 0 || rep.Gaps != 0 || rep.Errors != 0 {
		t.Fatalf("load test found faults: %+v\n%s", rep, errOut)
	}
	if rep.Retries == 0 || rep.Reconnects == 0 {
		t.Fatalf("no retries or reconnects exercised: %+v", rep)
	}
	// The rate leaves the warm-up out; the move count does not.
	if rep.WarmupS != 0.5 || rep.MovesPerS*1.5 > float64(rep.Moves)+0.5 {
		t.Fatalf("warm-up not applied as asked: %+v", rep)
	}
	if _, _, code := palace("loadtest", "games", "--addr", addr, "--duration", "2s", "--warmup", "2s"); code != exitUsage {
		t.Fatalf("a warm-up as long as the run: exit %d, want %d", code, exitUsage)
	}
}

func TestLoadtestAIReportsJobs(t *testing.T) {
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	out, errOut, code := palace("loadtest", "ai", "--addr", addr, "--level", "1", "--clients", "2", "--duration", "1s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep aiReport
	lastJSON(t, out, &rep)
	if rep.Jobs == 0 || rep.Errors != 0 || rep.Nodes == 0 {
		t.Fatalf("report %+v\n%s", rep, errOut)
	}
}

func TestEngineMatchPrintsTable(t *testing.T) {
	out, errOut, code := palace("engine", "match", "--a", "level:2", "--b", "level:1", "--games", "2", "--variant", "janggi", "--opening-plies", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "palace-level-2") || !strings.Contains(out, "elo") || strings.Count(errOut, "game ") != 2 {
		t.Fatalf("stdout %q stderr %q", out, errOut)
	}
	if _, _, code := palace("engine", "match", "--a", "level:11"); code == 0 {
		t.Fatal("accepted level 11")
	}
}

func TestUCIAnswersHandshake(t *testing.T) {
	var out strings.Builder
	code := run(context.Background(), []string{"uci"}, strings.NewReader("uci\nisready\nquit\n"), &out, &strings.Builder{})
	if code != 0 || !strings.Contains(out.String(), "uciok") || !strings.Contains(out.String(), "readyok") {
		t.Fatalf("exit %d, output %q", code, out.String())
	}
}
