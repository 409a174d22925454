package rules

import (
	"errors"
	"hash/fnv"
	"slices"
	"strings"
	"testing"
)

// fuzzPositions are the positions the notation fuzzers parse against.
func fuzzPositions(tb testing.TB, v Variant) []*Position {
	tb.Helper()
	fens := append([]string{StartFEN(v)}, janggiFENs...)
	if v == Xiangqi {
		fens = append([]string{StartFEN(v)}, xiangqiTandemFENs...)
	}
	ps := make([]*Position, len(fens))
	for i, fen := range fens {
		ps[i] = mustFEN(tb, v, fen)
	}
	return ps
}

// checkParsed checks what a notation parser returned for arbitrary text:
// an error of the package's kinds, or a legal move that writes back to a
// text the parser reads as the same move.
func checkParsed(t *testing.T, p *Position, s string, m Move, err error, write func(*Position, Move) (string, error), parse func(*Position, string) (Move, error)) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrBadMove) && !errors.Is(err, ErrIllegalMove) {
			t.Fatalf("%s: %q: error %v wraps neither ErrBadMove nor ErrIllegalMove", p.FEN(), s, err)
		}
		return
	}
	if !slices.Contains(p.LegalMoves(nil), m) {
		t.Fatalf("%s: %q parsed as %v, which is not legal", p.FEN(), s, m)
	}
	w, err := write(p, m)
	if err != nil {
		t.Fatalf("%s: %q parsed as %v, which cannot be written: %v", p.FEN(), s, m, err)
	}
	if back, err := parse(p, w); err != nil || back != m {
		t.Fatalf("%s: %v written %q reads back as %v, %v", p.FEN(), m, w, back, err)
	}
}

func FuzzParseWXF(f *testing.F) {
	for _, s := range []string{"C2.5", "H2+3", "R+.8", "P-.4", "25.4", "+C.5", "c2=5", "A4+5", "", "炮二平五", "P++1", "15+1", "K5+1"} {
		f.Add(s)
	}
	ps := fuzzPositions(f, Xiangqi)
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range ps {
			m, err := ParseWXF(p, s)
			checkParsed(t, p, s, m, err, WXF, ParseWXF)
		}
	})
}

func FuzzParseJanggiNotation(f *testing.F) {
	for _, s := range []string{"02마83", "한수쉼", "pass", "H02-83", "02馬83", "71졸72", "95궁95", "", "0마83", "02\xff83", "34졸25"} {
		f.Add(s)
	}
	ps := fuzzPositions(f, Janggi)
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range ps {
			m, err := ParseJanggiNotation(p, s)
			checkParsed(t, p, s, m, err, JanggiNotation, ParseJanggiNotation)
		}
	})
}

// gameSnapshot is everything a refused Play must leave alone.
type gameSnapshot struct {
	fen     string
	moves   string
	outcome Outcome
	legal   string
}

func gameSnapshotOf(g *Game) gameSnapshot {
	return gameSnapshot{g.Position().FEN(), fmtMoves(g.Moves()), g.Outcome(), fmtMoves(g.LegalMoves())}
}

func fmtMoves(ms []Move) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString(m.String())
		b.WriteByte(' ')
	}
	return b.String()
}

// FuzzGame feeds a script of words to a game: a word that is a move in
// coordinate notation is played as is (legal or not); any other word picks
// a legal move by its hash, so that games get deep, and its hash is also
// played as a raw Move value, which may be no move at all.
func FuzzGame(f *testing.F) {
	f.Add(false, "h3e3 h10g8 e3e7 a1a5 e7e3 x y z")
	f.Add(true, "e2e2 e9e9 a1a2")
	f.Add(true, "a1a2 a10a9 a2a1 a9a10 a1a2 a10a9 a2a1 a9a10 a1a2")
	f.Add(false, "b2b10 e1e1 0000 a0a0 i10i10 q w e r t y")
	f.Fuzz(func(t *testing.T, janggi bool, script string) {
		v := Xiangqi
		if janggi {
			v = Janggi
		}
		g := mustGame(t, v, "")
		for _, word := range strings.Fields(script) {
			moves := []Move{}
			if m, err := ParseMove(word); err == nil {
				moves = append(moves, m)
			} else {
				h := fnv.New32a()
				h.Write([]byte(word))
				sum := h.Sum32()
				if legal := sortedLegal(g); len(legal) > 0 {
					moves = append(moves, legal[int(sum%uint32(len(legal)))])
				}
				moves = append(moves, Move(sum))
			}
			for _, m := range moves {
				before := gameSnapshotOf(g)
				info, err := g.Play(m)
				if err != nil {
					if !errors.Is(err, ErrIllegalMove) && !errors.Is(err, ErrGameOver) {
						t.Fatalf("Play(%v): error %v of an unknown kind", m, err)
					}
					if after := gameSnapshotOf(g); after != before {
						t.Fatalf("Play(%v) failed (%v) but changed the game:\n%+v\n%+v", m, err, before, after)
					}
					continue
				}
				if info.Ply != g.Plies() || info.Move != m || g.Moves()[info.Ply-1] != m {
					t.Fatalf("Play(%v) = %+v after %d plies", m, info, g.Plies())
				}
			}
		}
	})
}
