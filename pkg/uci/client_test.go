package uci

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/engine"
	"github.com/palacehq/palace/pkg/rules"
)

// scripted is a Client talking to a fake engine that answers every go
// with "bestmove " + best.
func scripted(t *testing.T, best string) *Client {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		defer outW.Close()
		sc := bufio.NewScanner(inR)
		for sc.Scan() {
			var err error
			switch l := sc.Text(); {
			case l == "uci":
				_, err = fmt.Fprintln(outW, "id name scripted\nuciok")
			case l == "isready":
				_, err = fmt.Fprintln(outW, "readyok")
			case len(l) >= 2 && l[:2] == "go":
				_, err = fmt.Fprintln(outW, "bestmove "+best)
			case l == "quit":
				return
			}
			if err != nil {
				return
			}
		}
	}()
	c, err := NewClient(context.Background(), outR, inW, func() error { return inW.Close() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// fakeEngine is a Client talking to a fake engine over OS pipes, as to an
// engine process (whose input, unlike an io.Pipe's, takes commands while
// the engine is busy). The engine answers uci and isready at once and
// ends on quit; every other command goes to answer, which prints lines
// with say, at once or later from a goroutine of its own, as an engine
// ends a search.
func fakeEngine(t *testing.T, answer func(cmd string, say func(lines ...string))) *Client {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // one line at a time
	say := func(lines ...string) {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range lines {
			if _, err := fmt.Fprintln(outW, l); err != nil {
				return
			}
		}
	}
	go func() {
		defer func() {
			mu.Lock()
			_ = outW.Close()
			mu.Unlock()
			_ = inR.Close()
		}()
		sc := bufio.NewScanner(inR)
		for sc.Scan() {
			switch l := sc.Text(); l {
			case "uci":
				say("id name fake", "uciok")
			case "isready":
				say("readyok")
			case "quit":
				return
			default:
				answer(l, say)
			}
		}
	}()
	c, err := NewClient(context.Background(), outR, inW, inW.Close)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		_ = outR.Close()
	})
	return c
}

// TestMoveScoresTheFirstPV: with MultiPV on, an engine prints one info
// line per PV and depth, best first. The Reply's Score is the position's
// value, the last exact score of the first PV (multipv 1), not that of
// whichever line came last: the other PVs' scores are worse moves', and a
// bound (a fail-high's lowerbound here) is no exact score.
func TestMoveScoresTheFirstPV(t *testing.T) {
	c := fakeEngine(t, func(cmd string, say func(...string)) {
		if strings.HasPrefix(cmd, "go") {
			say(
				"info depth 7 seldepth 9 multipv 1 score cp 180 nodes 500 pv h3e3 h10g8",
				"info depth 7 seldepth 9 multipv 2 score cp -350 nodes 500 pv a1a2 h10g8",
				"info depth 8 seldepth 10 multipv 1 score cp 250 nodes 1000 pv h3e3 h10g8",
				"info depth 8 seldepth 10 multipv 2 score cp -400 nodes 1000 pv a1a2 h10g8",
				"info depth 9 seldepth 11 multipv 1 score cp 900 lowerbound nodes 1500 pv h3e3",
				"info depth 9 seldepth 11 multipv 2 score cp -500 upperbound nodes 1500 pv a1a2",
				"bestmove h3e3",
			)
		}
	})
	r, err := c.Move(context.Background(), rules.Xiangqi, rules.StartFEN(rules.Xiangqi), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Move.String() != "h3e3" || !r.Scored || r.Score != 250 {
		t.Fatalf("reply %+v; want h3e3 scored 250 (the first PV's last exact score)", r)
	}
}

// TestClientRefusesABadBestMove: the client hands on only a move that is
// legal where it was asked, and "(none)" only where there is no move; an
// engine that says otherwise is wrong, and its answer an error.
func TestClientRefusesABadBestMove(t *testing.T) {
	const mated = "3k5/7P1/3R4P/9/9/9/9/9/9/4K4 b - - 1 1"
	h3e3, _ := rules.ParseMove("h3e3")
	start := rules.StartFEN(rules.Xiangqi)
	tests := []struct {
		name, fen, best string
		moves           []rules.Move
		want            error // nil: the move is played
	}{
		{name: "legal", fen: start, moves: []rules.Move{h3e3}, best: "h10g8"},
		{name: "opponent's piece", fen: start, moves: []rules.Move{h3e3}, best: "a1a2", want: ErrBadMove},
		{name: "blocked chariot", fen: start, best: "a1a9", want: ErrBadMove},
		{name: "not a move", fen: start, best: "zz", want: ErrBadMove},
		{name: "none with moves to play", fen: start, moves: []rules.Move{h3e3}, best: "(none)", want: ErrBadMove},
		{name: "nothing with moves to play", fen: start, best: "", want: ErrBadMove},
		{name: "none when mated", fen: mated, best: "(none)", want: engine.ErrNoLegalMove},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := scripted(t, tt.best)
			r, err := c.Move(context.Background(), rules.Xiangqi, tt.fen, tt.moves)
			if tt.want == nil {
				if err != nil || r.Move.String() != tt.best {
					t.Fatalf("got %v, %v; want %s", r.Move, err, tt.best)
				}
				return
			}
			if !errors.Is(err, tt.want) || r.Move != rules.NoMove {
				t.Fatalf("got %v, %v; want no move and %v", r.Move, err, tt.want)
			}
			if tt.want == ErrBadMove && errors.Is(err, engine.ErrNoLegalMove) {
				t.Fatalf("%v passes for the end of the game", err)
			}
		})
	}
}

// TestGoCommandCapsTheTime: a cap below the configured time replaces it,
// one above leaves it, and a search bounded by depth or nodes alone gets
// the cap as its movetime.
func TestGoCommandCapsTheTime(t *testing.T) {
	tests := []struct {
		g    GoParams
		most time.Duration
		want string
	}{
		{GoParams{}, 0, "go movetime 1000"},
		{GoParams{}, 250 * time.Millisecond, "go movetime 250"},
		{GoParams{}, 5 * time.Second, "go movetime 1000"},
		{GoParams{MoveTime: 3 * time.Second}, 2 * time.Second, "go movetime 2000"},
		{GoParams{Depth: 8}, 0, "go depth 8"},
		{GoParams{Depth: 8}, 400 * time.Millisecond, "go depth 8 movetime 400"},
		{GoParams{Nodes: 5000}, 400 * time.Millisecond, "go nodes 5000 movetime 400"},
		{GoParams{}, 300 * time.Microsecond, "go movetime 1"},
	}
	for _, tt := range tests {
		if got := tt.g.command(tt.most); got != tt.want {
			t.Errorf("%+v capped at %v: %q, want %q", tt.g, tt.most, got, tt.want)
		}
	}
}
