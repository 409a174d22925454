package uci

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/rules"
)

// TestMoveReturnsWhenContextEnds: an engine that hangs (it answers
// neither go nor stop) does not hold MoveWithin past its context: the
// search is stopped and ctx's error returned at once, without waiting for
// a bestmove that may never come. The next request, which must first read
// that bestmove, is bounded by its own context in turn.
func TestMoveReturnsWhenContextEnds(t *testing.T) {
	c := fakeEngine(t, func(string, func(...string)) {})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.MoveWithin(ctx, rules.Xiangqi, rules.StartFEN(rules.Xiangqi), nil, 100*time.Millisecond)
	if el := time.Since(start); el > time.Second {
		t.Fatalf("MoveWithin returned %v after it was called with a 200ms deadline (err %v)", el.Round(time.Millisecond), err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("MoveWithin against a hung engine: %v; want its context's error", err)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	err = c.NewGame(ctx, rules.Janggi)
	if el := time.Since(start); el > time.Second || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("NewGame on an engine that still owes a bestmove: %v after %v; want its context's error within 200ms", err, el.Round(time.Millisecond))
	}
}

// TestRequestAfterACancelledMoveIgnoresItsBestMove: a search stopped when
// MoveWithin's context ended still ends with a bestmove (and info lines),
// here long after MoveWithin returned. The next request reads and drops
// them before its own: the next move is the new search's, with its score,
// not the stale answer; a NewGame in between waits for the stale bestmove
// too, though the engine answers its isready at once, before that
// bestmove, as an engine busy searching does.
func TestRequestAfterACancelledMoveIgnoresItsBestMove(t *testing.T) {
	for _, newGame := range []bool{false, true} {
		name := "move"
		if newGame {
			name = "new game, then move"
		}
		t.Run(name, func(t *testing.T) {
			const late = 700 * time.Millisecond
			stale := make(chan struct{})
			gos := 0
			c := fakeEngine(t, func(cmd string, say func(...string)) {
				if !strings.HasPrefix(cmd, "go") {
					return
				}
				gos++
				if gos == 1 {
					// A search that ends late, whatever stop says.
					go func() {
						time.Sleep(late)
						say("info depth 1 score cp -777 pv a1a2", "bestmove a1a2")
						close(stale)
					}()
					return
				}
				<-stale // one search at a time
				say("info depth 1 score cp 33 pv h3e3", "bestmove h3e3")
			})
			v, fen := rules.Xiangqi, rules.StartFEN(rules.Xiangqi)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			r, err := c.MoveWithin(ctx, v, fen, nil, 0)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("first move: %+v, %v; want its context's error", r, err)
			}
			if el := time.Since(start); el > late/2 {
				t.Fatalf("first move returned after %v, with a 100ms deadline: it waited for the stopped search", el.Round(time.Millisecond))
			}

			ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if newGame {
				if err := c.NewGame(ctx, v); err != nil {
					t.Fatal(err)
				}
				if el := time.Since(start); el < late {
					t.Fatalf("NewGame returned %v after the first move's go, before the stopped search's bestmove (%v)", el.Round(time.Millisecond), late)
				}
			}
			r, err = c.MoveWithin(ctx, v, fen, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			if r.Move.String() != "h3e3" || !r.Scored || r.Score != 33 {
				t.Fatalf("second move: %+v; want h3e3 scored 33 (not the stopped search's a1a2, -777)", r)
			}
		})
	}
}
