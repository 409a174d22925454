package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/palacehq/palace/pkg/rules"
)

// FuzzSearch searches any position ParseFEN accepts, after any moves a
// client could send with it, as the AI service does: the search never
// panics, a history with an illegal move is refused with ErrIllegalMove,
// and otherwise the answer is a legal move of the position reached with a
// legal PV, or ErrNoLegalMove exactly when there is none.
func FuzzSearch(f *testing.F) {
	f.Add(false, "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR w - - 0 1", "h3e3 h10g8", uint8(2))
	f.Add(true, "", "e2e2 e9e9", uint8(3))
	f.Add(false, "3k5/7P1/3R4P/9/9/9/9/9/9/4K4 b - - 1 1", "", uint8(3))
	f.Add(true, "1b2a2b1/9/4kR3/5P3/9/9/9/5K3/9/p7p b - - 0 1", "", uint8(2))
	f.Add(true, "4k4/9/9/9/9/9/9/9/9/4K4 w - - 199 1", "e1e1 e10e10 e1d1", uint8(4))
	f.Add(false, "4k4/9/9/9/9/9/9/9/9/3K5 b - - 2147483647 2147483647", "e10e9", uint8(4))
	e := New(Options{HashMB: 1})
	f.Fuzz(func(t *testing.T, janggi bool, fen, script string, depth uint8) {
		v := rules.Xiangqi
		if janggi {
			v = rules.Janggi
		}
		if fen == "" {
			fen = rules.StartFEN(v)
		}
		if len(fen) > 256 || len(script) > 512 {
			return // the services refuse longer ones
		}
		start, err := rules.ParseFEN(v, fen)
		if err != nil {
			return
		}
		var moves []rules.Move
		for _, w := range strings.Fields(script) {
			m, err := rules.ParseMove(w)
			if err != nil {
				return
			}
			moves = append(moves, m)
		}
		// Where the moves lead, by the rules alone.
		pos := start.Clone()
		illegal := false
		for _, m := range moves {
			if pos.CheckMove(m) != nil {
				illegal = true
				break
			}
			pos.Make(m)
		}
		lim := Limits{Depth: 1 + int(depth%4), Nodes: 20_000}
		res, err := e.Search(context.Background(), start, moves, lim, nil)
		switch {
		case illegal:
			if !errors.Is(err, rules.ErrIllegalMove) {
				t.Fatalf("%s after %v: history with an illegal move gave %v, %v", fen, moves, res.Move, err)
			}
			return
		case errors.Is(err, rules.ErrIllegalMove):
			t.Fatalf("%s after %v: legal history refused: %v", fen, moves, err)
		}
		legal := pos.LegalMoves(nil)
		if len(legal) == 0 {
			if !errors.Is(err, ErrNoLegalMove) || res.Move != rules.NoMove {
				t.Fatalf("%s after %v: no legal move, search gave %v, %v", fen, moves, res.Move, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s after %v: %v", fen, moves, err)
		}
		if !slices.Contains(legal, res.Move) {
			t.Fatalf("%s after %v: illegal move %v", fen, moves, res.Move)
		}
		if len(res.PV) > 0 && res.PV[0] != res.Move {
			t.Fatalf("%s after %v: PV %v does not start with %v", fen, moves, res.PV, res.Move)
		}
		for _, m := range res.PV {
			if err := pos.CheckMove(m); err != nil {
				t.Fatalf("%s after %v: PV %v: %v", fen, moves, res.PV, err)
			}
			pos.Make(m)
		}
	})
}
