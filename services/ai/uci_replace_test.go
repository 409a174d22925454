package ai

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/rules"
)

// TestAMoveAfterAnEngineWasReplacedKeepsToItsBudget: the worker gives the
// mover a budget, the most the search may take because the game's clock
// leaves no more (thinkBudget). The start of the external engine that
// replaces one that failed (an engine loading its network takes a second
// or more; here 1.5 s) does not come on top of the next move's budget, or
// in byo-yomi or on a short clock the AI's move would arrive past its time.
func TestAMoveAfterAnEngineWasReplacedKeepsToItsBudget(t *testing.T) {
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	script := filepath.Join(dir, "engine")
	// The first engine answers nonsense (an illegal move) and is replaced;
	// every later one takes 1.5 s to start and uses the movetime it is given.
	body := fmt.Sprintf(`#!/bin/sh
echo started >> %q
n=$(wc -l < %q)
if [ "$n" -gt 1 ]; then sleep 1.5; fi
while read -r l; do
  case "$l" in
    uci) echo uciok ;;
    isready) echo readyok ;;
    go*movetime*)
      ms=${l##*movetime }
      sleep $(awk "BEGIN{print $ms/1000}")
      if [ "$n" -gt 1 ]; then echo 'bestmove h3e3'; else echo 'bestmove a1b1'; fi ;;
    quit) exit 0 ;;
  esac
done
`, starts, starts)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, closeMover, err := newMover(ctx, Config{UCIEngine: script, UCIMoveTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeMover() })
	fen := rules.StartFEN(rules.Xiangqi)
	if _, _, err := m.Move(ctx, rules.Xiangqi, fen, nil, 1, 0, 100*time.Millisecond); err == nil {
		t.Fatal("the first engine's illegal move was taken")
	}
	const budget = 800 * time.Millisecond
	start := time.Now()
	mv, _, err := m.Move(ctx, rules.Xiangqi, fen, nil, 1, 0, budget)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("move %v in %v with a budget of %v", mv, took, budget)
	// The engine start the fault adds is 1.5 s; the slack is for a loaded
	// machine running the suite under -race.
	if took > budget+700*time.Millisecond {
		t.Fatalf("the move after an engine was replaced took %v with a budget of %v: the new engine's start was not taken from it", took.Round(10*time.Millisecond), budget)
	}
}
