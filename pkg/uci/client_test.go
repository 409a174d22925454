package uci

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

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
