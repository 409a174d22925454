package rules

import (
	"testing"
)

// checkMakeUnmake plays every legal move of p and takes it back, checking
// that the move is really legal, that the incremental hash is right, and
// that Unmake restores the position exactly.
func checkMakeUnmake(tb testing.TB, p *Position) {
	tb.Helper()
	fen, hash := p.FEN(), p.Hash()
	mover := p.Turn()
	for _, m := range p.LegalMoves(nil) {
		u := p.Make(m)
		if got := p.computeHash(); p.Hash() != got {
			tb.Fatalf("%s after %v: incremental hash %x, from scratch %x", fen, m, p.Hash(), got)
		}
		if g := p.GeneralSquare(mover); g == NoSquare || p.IsAttacked(g, mover^1) ||
			(p.Variant() == Xiangqi && p.GeneralsFacing()) {
			tb.Fatalf("%s: legal move %v leaves the mover's general exposed", fen, m)
		}
		if !m.IsPass() && u.Captured != NoPiece && p.HalfmoveClock() != 0 {
			tb.Fatalf("%s: capture %v did not reset the halfmove clock", fen, m)
		}
		p.Unmake(m, u)
		if got := p.FEN(); got != fen {
			tb.Fatalf("Make/Unmake %v changed the FEN:\n%s\n%s", m, fen, got)
		}
		if p.Hash() != hash {
			tb.Fatalf("%s: Make/Unmake %v changed the hash", fen, m)
		}
	}
}

func TestMakeUnmake(t *testing.T) {
	plies := 150
	if testing.Short() {
		plies = 60
	}
	for i, sp := range startPositions() {
		for g := 0; g < 3; g++ {
			randomGame(t, sp.v, sp.fen, uint64(7919*i+g), plies, func(p *Position) { checkMakeUnmake(t, p) })
		}
	}
}

func TestMoveCounters(t *testing.T) {
	tests := []struct {
		name    string
		variant Variant
		fen     string
		moves   []string
		want    string
	}{
		{
			name: "first's move keeps the move number", variant: Janggi, fen: StartFEN(Janggi),
			moves: []string{"c4c5"},
			want:  "rnba1abnr/4k4/1c5c1/p1p1p1p1p/9/2P6/P3P1P1P/1C5C1/4K4/RNBA1ABNR b - - 1 1",
		},
		{
			name: "second's move increments the move number", variant: Janggi, fen: StartFEN(Janggi),
			moves: []string{"c4c5", "c7c6"},
			want:  "rnba1abnr/4k4/1c5c1/p3p1p1p/2p6/2P6/P3P1P1P/1C5C1/4K4/RNBA1ABNR w - - 2 2",
		},
		{
			name: "capture resets the halfmove clock", variant: Janggi, fen: StartFEN(Janggi),
			moves: []string{"c4c5", "c7c6", "c5c6"},
			want:  "rnba1abnr/4k4/1c5c1/p3p1p1p/2P6/9/P3P1P1P/1C5C1/4K4/RNBA1ABNR b - - 0 2",
		},
		{
			name: "passes count as plies", variant: Janggi, fen: StartFEN(Janggi),
			moves: []string{"e2e2", "e9e9"},
			want:  "rnba1abnr/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR w - - 2 2",
		},
		{
			name: "xiangqi central cannon", variant: Xiangqi, fen: StartFEN(Xiangqi),
			moves: []string{"h3e3", "h8e8", "e3e7"},
			want:  "rnbakabnr/9/1c2c4/p1p1C1p1p/9/9/P1P1P1P1P/1C7/9/RNBAKABNR b - - 0 2",
		},
		{
			// The counters stop at the largest a FEN may carry, so that
			// the position prints as a FEN that parses.
			name: "counters stop at the FEN limit", variant: Janggi,
			fen:   "rnba1abnr/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR b - - 2147483646 2147483647",
			moves: []string{"a7a6", "a4a5", "c7c6"},
			want:  "rnba1abnr/4k4/1c5c1/4p1p1p/p1p6/P8/2P1P1P1P/1C5C1/4K4/RNBA1ABNR w - - 2147483647 2147483647",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustFEN(t, tt.variant, tt.fen)
			var undo []Undo
			for _, s := range tt.moves {
				m := mustParseMove(t, s)
				if err := p.CheckMove(m); err != nil {
					t.Fatal(err)
				}
				undo = append(undo, p.Make(m))
			}
			if got := p.FEN(); got != tt.want {
				t.Errorf("FEN() = %q, want %q", got, tt.want)
			}
			if _, err := ParseFEN(tt.variant, p.FEN()); err != nil {
				t.Errorf("the FEN after the moves does not parse: %v", err)
			}
			for i := len(tt.moves) - 1; i >= 0; i-- {
				p.Unmake(mustParseMove(t, tt.moves[i]), undo[i])
			}
			if got := p.FEN(); got != tt.fen {
				t.Errorf("after unmaking everything FEN() = %q, want %q", got, tt.fen)
			}
		})
	}
}

// TestNoAllocations: the search engine calls these millions of times a second.
func TestNoAllocations(t *testing.T) {
	for _, sp := range startPositions()[:6] {
		p := mustFEN(t, sp.v, sp.fen)
		buf := make([]Move, 0, 256)
		allocs := testing.AllocsPerRun(100, func() {
			buf = p.LegalMoves(buf[:0])
			for _, m := range buf {
				u := p.Make(m)
				_ = p.InCheck()
				_ = p.Hash()
				p.Unmake(m, u)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per LegalMoves+Make/Unmake round, want 0", sp.fen, allocs)
		}
	}
}

func TestPerftHelpers(t *testing.T) {
	p := mustFEN(t, Janggi, StartFEN(Janggi))
	if got := Perft(p, 0); got != 1 {
		t.Errorf("Perft(0) = %d, want 1", got)
	}
	var sum uint64
	for _, n := range Divide(p, 3) {
		sum += n
	}
	if want := Perft(p, 3); sum != want {
		t.Errorf("Divide(3) sums to %d, want %d", sum, want)
	}
	if fen := p.FEN(); fen != StartFEN(Janggi) {
		t.Errorf("Perft changed the position: %s", fen)
	}
}
