package ai

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/rules"
)

// engineScript writes an executable shell script into a temp dir.
func engineScript(t *testing.T, body string) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, "engine")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(body, "DIR", dir)), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] != 'Z'
}

func pidsIn(t *testing.T, file string) []int {
	t.Helper()
	b, _ := os.ReadFile(file)
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

// TestAnOverrunningEngineIsStoppedAtItsBudget: an external engine that
// overruns the movetime it is given (it only answers when told to stop,
// as an engine whose time management ignores movetime, or that is slow to
// notice it, does) was never sent stop when the AI's budget was spent:
// the worker waited for --ai-uci-move-timeout (30 s by default), and the
// AI seat lost on time although the engine would have answered at once.
func TestAnOverrunningEngineIsStoppedAtItsBudget(t *testing.T) {
	_, script := engineScript(t, `#!/bin/sh
while read -r l; do
  case "$l" in
    uci) echo uciok ;;
    isready) echo readyok ;;
    stop) echo 'bestmove h3e3' ;;
    quit) exit 0 ;;
  esac
done
`)
	ctx := context.Background()
	m, closeMover, err := newMover(ctx, Config{UCIEngine: script, UCIMoveTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeMover() })
	const budget = 500 * time.Millisecond
	start := time.Now()
	_, _, err = m.Move(ctx, rules.Xiangqi, rules.StartFEN(rules.Xiangqi), nil, 1, 0, budget)
	took := time.Since(start)
	// Without the stop, the move waits out --ai-uci-move-timeout (5 s).
	if err != nil || took > budget+time.Second {
		t.Fatalf("an engine that overruns its movetime but answers stop: Move took %v (err %v) with a budget of %v; want its bestmove, asked for with stop once the budget is spent", took.Round(time.Millisecond), err, budget)
	}
}

// TestAHungEngineBehindAWrapperIsKilled: an operator's --ai-uci-engine is
// often a wrapper script (cd to the network's folder, set env) that runs
// the engine as its child. When that engine hung, the worker gave up on
// it after --ai-uci-move-timeout (30 s), long past the AI's clock, and
// "replaced" it, but killed only the wrapper: the hung engine kept running
// (and burning a core) for ever, one more per hang. It is given up a
// second after its time, and killed with its wrapper.
func TestAHungEngineBehindAWrapperIsKilled(t *testing.T) {
	dir, script := engineScript(t, `#!/bin/sh
sh DIR/inner
`)
	inner := fmt.Sprintf(`#!/bin/sh
echo $$ >> %[1]s/inners
while read -r l; do
  case "$l" in
    uci) echo uciok ;;
    isready) echo readyok ;;
    go*) while :; do sleep 0.2; done ;;
    quit) exit 0 ;;
  esac
done
`, dir)
	if err := os.WriteFile(filepath.Join(dir, "inner"), []byte(inner), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range pidsIn(t, filepath.Join(dir, "inners")) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	ctx := context.Background()
	m, closeMover, err := newMover(ctx, Config{UCIEngine: script, UCIMoveTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const budget = 200 * time.Millisecond
	start := time.Now()
	_, _, err = m.Move(ctx, rules.Xiangqi, rules.StartFEN(rules.Xiangqi), nil, 1, 0, budget)
	if err == nil {
		t.Fatal("a hung engine gave a move")
	}
	// Its replacement's start is in the call, the hung one's close (2 s)
	// too.
	if took := time.Since(start); took > budget+hungAfter+5*time.Second {
		t.Fatalf("a hung engine was given up after %v, with a budget of %v", took.Round(time.Millisecond), budget)
	}
	_ = closeMover()
	pids := pidsIn(t, filepath.Join(dir, "inners"))
	if len(pids) == 0 {
		t.Fatal("the engine never started")
	}
	time.Sleep(500 * time.Millisecond)
	if alive(pids[0]) {
		t.Fatalf("the hung engine (pid %d, child of the --ai-uci-engine wrapper) still runs after it was replaced and every engine was closed: only the wrapper was killed", pids[0])
	}
}

// TestASlowNewGameIsNotTakenForAHang: the bound on an engine asked to
// stop (its time and hungAfter more) is the search's alone: holding its
// ucinewgame to it, an engine slow to clear a large hash was replaced at
// every move, and the AI never moved, where it can move late but within
// the game's clock, whose budget is only a share of it.
func TestASlowNewGameIsNotTakenForAHang(t *testing.T) {
	_, script := engineScript(t, `#!/bin/sh
while read -r l; do
  case "$l" in
    uci) echo uciok ;;
    ucinewgame) sleep 1.5 ;;
    isready) echo readyok ;;
    go*) echo 'bestmove h3e3' ;;
    quit) exit 0 ;;
  esac
done
`)
	ctx := context.Background()
	m, closeMover, err := newMover(ctx, Config{UCIEngine: script, UCIMoveTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeMover() })
	const budget = 300 * time.Millisecond
	for i := range 2 {
		start := time.Now()
		_, _, err := m.Move(ctx, rules.Xiangqi, rules.StartFEN(rules.Xiangqi), nil, 1, 0, budget)
		if err != nil {
			t.Fatalf("try %d: an engine whose ucinewgame takes 1.5 s, answering go at once, budget %v: Move failed after %v: %v; want its move (the engine is sound, only slow to clear its hash)", i, budget, time.Since(start).Round(time.Millisecond), err)
		}
	}
}
