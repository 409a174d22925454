package worker

import (
	"context"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/engine"
	"github.com/palacehq/palace/pkg/rules"
)

// TestBuiltinPlaysAtTheSeatsLevel: the built-in engine searches within
// the seat's level budget, so that a beginner's AI plays like one (and
// answers at once), not at full strength.
func TestBuiltinPlaysAtTheSeatsLevel(t *testing.T) {
	b := NewBuiltin(1)
	for _, level := range []int{1, 3} {
		m, nodes, err := b.Move(context.Background(), rules.Xiangqi, rules.StartFEN(rules.Xiangqi), nil, level, 7, 0)
		if err != nil || m == rules.NoMove {
			t.Fatalf("level %d: %v %v", level, m, err)
		}
		if budget := engine.Level(level).Nodes; nodes > budget {
			t.Errorf("level %d searched %d nodes; its budget is %d", level, nodes, budget)
		}
	}
}

// TestBuiltinMovesDependOnlyOnTheGameAndSeed: a worker's earlier searches
// do not change its next move, so that a job taken over by another
// worker, or a game replayed with its seeds, plays the same moves.
func TestBuiltinMovesDependOnlyOnTheGameAndSeed(t *testing.T) {
	start := rules.StartFEN(rules.Janggi)
	opening, err := rules.ParseMove("a4b4")
	if err != nil {
		t.Fatal(err)
	}
	fresh, nodes, err := NewBuiltin(1).Move(context.Background(), rules.Janggi, start, []rules.Move{opening}, 5, 42, 0)
	if err != nil {
		t.Fatal(err)
	}
	used := NewBuiltin(1)
	if _, _, err := used.Move(context.Background(), rules.Janggi, start, nil, 5, 7, 0); err != nil {
		t.Fatal(err)
	}
	again, againNodes, err := used.Move(context.Background(), rules.Janggi, start, []rules.Move{opening}, 5, 42, 0)
	if err != nil || again != fresh || againNodes != nodes {
		t.Fatalf("after another search: %v in %d nodes (%v); a fresh engine plays %v in %d", again, againNodes, err, fresh, nodes)
	}
}

// TestABuiltinMoveKeepsToItsBudgetFromTheCall: the table is cleared
// after each search, off the AI's clock (a clear that zeroes a large
// table takes seconds the first time); a move that must wait for it still
// answers within its budget, counted from the call, as the AI's clock
// counts it: the search gets what is left.
func TestABuiltinMoveKeepsToItsBudgetFromTheCall(t *testing.T) {
	const clearing, budget = 600 * time.Millisecond, 800 * time.Millisecond
	b := NewBuiltin(1)
	<-b.cleared
	slow := make(chan struct{})
	time.AfterFunc(clearing, func() { close(slow) })
	b.cleared = slow // a clear still under way
	called := time.Now()
	if _, _, err := b.Move(context.Background(), rules.Xiangqi, rules.StartFEN(rules.Xiangqi), nil, 10, 7, budget); err != nil {
		t.Fatal(err)
	}
	// Waiting for the table on top of the budget would add 600 ms.
	if took := time.Since(called); took > budget+450*time.Millisecond {
		t.Fatalf("a move with a budget of %v, waiting %v for the table, took %v", budget, clearing, took)
	}
	// The next move waits for the clear that followed this search.
	if _, _, err := b.Move(context.Background(), rules.Xiangqi, rules.StartFEN(rules.Xiangqi), nil, 1, 7, 0); err != nil {
		t.Fatal(err)
	}
}
