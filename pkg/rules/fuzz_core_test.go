package rules

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func fuzzVariant(b uint8) Variant {
	if b&1 == 0 {
		return Janggi
	}
	return Xiangqi
}

// FuzzParseFEN: ParseFEN never panics, fails only with ErrBadFEN, and what it
// accepts re-serialises to a canonical FEN describing the same position.
func FuzzParseFEN(f *testing.F) {
	for _, sp := range startPositions() {
		v := uint8(0)
		if sp.v == Xiangqi {
			v = 1
		}
		f.Add(v, sp.fen)
	}
	f.Add(uint8(0), "4k4/9/9/9/9/9/9/9/9/4K4 w")
	f.Add(uint8(1), "rheakaehr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RHEAKAEHR r - - 3 9")
	f.Add(uint8(0), "9/9/9/9/9/9/9/9/9/9 w - - 0 1")
	f.Add(uint8(1), "4k4/9/9/9/9/9/9/9/9/3K5 b - - 0 0")
	f.Add(uint8(1), "45/9/9 b")
	f.Fuzz(func(t *testing.T, vb uint8, fen string) {
		v := fuzzVariant(vb)
		p, err := ParseFEN(v, fen)
		if err != nil {
			if !errors.Is(err, ErrBadFEN) {
				t.Fatalf("error %v does not wrap ErrBadFEN", err)
			}
			return
		}
		out := p.FEN()
		q, err := ParseFEN(v, out)
		if err != nil {
			t.Fatalf("%q re-serialised as %q, which does not parse: %v", fen, out, err)
		}
		if q.FEN() != out || q.board != p.board || q.turn != p.turn || q.Hash() != p.Hash() {
			t.Fatalf("%q -> %q -> %q changed the position", fen, out, q.FEN())
		}
		checkMakeUnmake(t, p)
		comparePosition(t, p, false)
	})
}

// FuzzParseMove: ParseMove and ParseSquare never panic, and an accepted move
// prints back exactly as given (the syntax has one spelling per move).
func FuzzParseMove(f *testing.F) {
	for _, s := range []string{"h3e3", "b10c8", "e2e2", "a10a1", "i10i10", "", "a", "a1", "a1a", "a0a1", "j1a1", "a11a1", "0000", "e2e2e2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMove(s)
		if err != nil {
			if !errors.Is(err, ErrBadMove) || m != NoMove {
				t.Fatalf("ParseMove(%q) = %v, %v", s, m, err)
			}
		} else if m.String() != s || !m.From().Valid() || !m.To().Valid() {
			t.Fatalf("ParseMove(%q) = %v", s, m)
		}
		sq, err := ParseSquare(s)
		if err == nil && sq.String() != s {
			t.Fatalf("ParseSquare(%q) = %v", s, sq)
		}
		if err != nil && (!errors.Is(err, ErrBadMove) || sq != NoSquare) {
			t.Fatalf("ParseSquare(%q) = %v, %v", s, sq, err)
		}
	})
}

// FuzzRandomPlay plays seeded random legal games and checks at every ply
// that Make/Unmake of each legal move restores FEN and hash, that the
// incremental hash matches a fresh one, that no legal move exposes the
// mover's general, and that the generator agrees with the reference one.
func FuzzRandomPlay(f *testing.F) {
	for i := range startPositions() {
		f.Add(uint64(i), uint8(i), uint8(100))
	}
	starts := startPositions()
	f.Fuzz(func(t *testing.T, seed uint64, start uint8, plies uint8) {
		sp := starts[int(start)%len(starts)]
		rng := rand.New(rand.NewPCG(seed, 1))
		randomGame(t, sp.v, sp.fen, seed, int(plies), func(p *Position) {
			checkMakeUnmake(t, p)
			comparePosition(t, p, rng.IntN(16) == 0)
		})
	})
}
