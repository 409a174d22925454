package handler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/rules"
)

// TestAProcessGoneQuietForgetsItsSeatsClosings: a process whose seats
// disconnected (announced) during a busy spell, and that then goes quiet,
// must not keep a record of every one of those seats. The records matter
// for flapMemory graces; nothing dropped them after that but a later
// closing announced.
func TestAProcessGoneQuietForgetsItsSeatsClosings(t *testing.T) {
	ctx := context.Background()
	const grace = time.Millisecond
	p := newPresence(grace, func(context.Context, string, rules.Side, int) bool { return true })
	const seats = 500
	for i := range seats {
		id := fmt.Sprintf("game-%d", i)
		p.opened(ctx, id, rules.First)
		p.closed(ctx, id, rules.First)
	}
	memory := flapMemory * grace
	// Well past every hold and twice the memory: nothing recent is left.
	start := time.Now()
	deadline := start.Add(2*memory + maxHoldGraces*grace + 2*time.Second)
	for {
		p.mu.Lock()
		s, r, l := len(p.seats), len(p.recording), len(p.lately)
		p.mu.Unlock()
		if s == 0 && r == 0 && l == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after %d seats closed (memory %v): presence still keeps %d seats, %d recordings, %d closings of seats long gone (want 0 of each: an idle process returns to its baseline)",
				time.Since(start).Round(time.Millisecond), seats, memory, s, r, l)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
