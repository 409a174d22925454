package worker

import (
	"context"
	"testing"

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
