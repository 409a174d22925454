package rules

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// placeFEN builds a FEN from placements like "Ke2" (FEN letter, square) with
// side "w" or "b" to move, so rule tests read as piece lists.
func placeFEN(tb testing.TB, side string, pieces ...string) string {
	tb.Helper()
	var board [NumSquares]byte
	for _, s := range pieces {
		sq, err := ParseSquare(s[1:])
		if err != nil {
			tb.Fatalf("placement %q: %v", s, err)
		}
		if board[sq] != 0 {
			tb.Fatalf("placement %q: square taken", s)
		}
		board[sq] = s[0]
	}
	var sb strings.Builder
	for r := NumRanks - 1; r >= 0; r-- {
		empty := 0
		for f := 0; f < NumFiles; f++ {
			c := board[f+NumFiles*r]
			if c == 0 {
				empty++
				continue
			}
			if empty > 0 {
				sb.WriteByte(byte('0' + empty))
				empty = 0
			}
			sb.WriteByte(c)
		}
		if empty > 0 {
			sb.WriteByte(byte('0' + empty))
		}
		if r > 0 {
			sb.WriteByte('/')
		}
	}
	return sb.String() + " " + side + " - - 0 1"
}

func moveStrings(ms []Move) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.String()
	}
	slices.Sort(out)
	return out
}

// legalFrom returns the sorted legal moves starting on from ("" = all).
func legalFrom(tb testing.TB, p *Position, from string) []string {
	tb.Helper()
	var out []string
	for _, m := range moveStrings(p.LegalMoves(nil)) {
		if from == "" || strings.HasPrefix(m, from) && m[len(from)] >= 'a' {
			out = append(out, m)
		}
	}
	return out
}

// startPositions are the positions random play starts from: the perft
// positions and every Janggi formation pairing.
func startPositions() []struct {
	v   Variant
	fen string
} {
	var out []struct {
		v   Variant
		fen string
	}
	for _, pt := range perftTests {
		out = append(out, struct {
			v   Variant
			fen string
		}{pt.variant, pt.fen})
	}
	for cho := MaSangSangMa; cho <= SangMaMaSang; cho++ {
		for han := MaSangSangMa; han <= SangMaMaSang; han++ {
			out = append(out, struct {
				v   Variant
				fen string
			}{Janggi, JanggiStartFEN(cho, han)})
		}
	}
	return out
}

// randomGame plays up to plies random legal moves from fen and calls visit
// before each move (and at the end) with the position.
func randomGame(tb testing.TB, v Variant, fen string, seed uint64, plies int, visit func(p *Position)) {
	tb.Helper()
	p := mustFEN(tb, v, fen)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	var buf []Move
	for i := 0; i < plies; i++ {
		visit(p)
		buf = p.LegalMoves(buf[:0])
		if len(buf) == 0 {
			return
		}
		// Passes are rare in real play; taking them as often as any move
		// would waste most games shuffling.
		m := buf[rng.IntN(len(buf))]
		if m.IsPass() && rng.IntN(8) != 0 {
			m = buf[rng.IntN(len(buf))]
		}
		p.Make(m)
	}
	visit(p)
}

// The reference move generator below is written from docs/rules.md with plain
// coordinates and no shared tables, so it checks the fast generator's tables
// and shortcuts rather than repeating them.

type refPos struct {
	v    Variant
	b    [NumSquares]Piece
	turn Side
}

func toRef(p *Position) *refPos { return &refPos{v: p.variant, b: p.board, turn: p.turn} }

func refPalace(sq int) int {
	f, r := sq%9, sq/9
	if f < 3 || f > 5 {
		return -1
	}
	if r <= 2 {
		return 0
	}
	if r >= 7 {
		return 1
	}
	return -1
}

func refCenter(sq int) bool { return sq == 4+9 || sq == 4+8*9 }

// refBetween returns the squares strictly between from and to on a line a
// chariot can use, and whether there is such a line.
func (rp *refPos) refBetween(from, to int) ([]int, bool) {
	f0, r0, f1, r1 := from%9, from/9, to%9, to/9
	df, dr := f1-f0, r1-r0
	if df != 0 && dr != 0 {
		if rp.v != Janggi || iabs(df) != iabs(dr) || iabs(df) > 2 {
			return nil, false
		}
		pal := refPalace(from)
		if pal < 0 || refPalace(to) != pal {
			return nil, false
		}
		if iabs(df) == 1 {
			return nil, refCenter(from) || refCenter(to)
		}
		mid := (from + to) / 2
		return []int{mid}, refCenter(mid)
	}
	sf, sr := sign(df), sign(dr)
	var out []int
	for f, r := f0+sf, r0+sr; f != f1 || r != r1; f, r = f+sf, r+sr {
		out = append(out, f+9*r)
	}
	return out, true
}

func (rp *refPos) canReach(from, to int) bool {
	b := &rp.b
	pc := b[from]
	if pc == NoPiece || from == to {
		return false
	}
	q := b[to]
	if q != NoPiece && q.Side() == pc.Side() {
		return false
	}
	side := pc.Side()
	f0, r0, f1, r1 := from%9, from/9, to%9, to/9
	df, dr := f1-f0, r1-r0
	adf, adr := iabs(df), iabs(dr)
	janggi := rp.v == Janggi
	empty := func(f, r int) bool { return b[f+9*r] == NoPiece }
	switch pc.Kind() {
	case General, Guard:
		if refPalace(from) != int(side) || refPalace(to) != int(side) {
			return false
		}
		orth := adf+adr == 1
		diag := adf == 1 && adr == 1 && (refCenter(from) || refCenter(to))
		if janggi {
			return orth || diag
		}
		if pc.Kind() == General {
			return orth
		}
		return diag
	case Chariot:
		between, ok := rp.refBetween(from, to)
		if !ok {
			return false
		}
		for _, s := range between {
			if b[s] != NoPiece {
				return false
			}
		}
		return true
	case Cannon:
		between, ok := rp.refBetween(from, to)
		if !ok {
			return false
		}
		var screens []Piece
		for _, s := range between {
			if b[s] != NoPiece {
				screens = append(screens, b[s])
			}
		}
		if janggi {
			return q.Kind() != Cannon && len(screens) == 1 && screens[0].Kind() != Cannon
		}
		if q == NoPiece {
			return len(screens) == 0
		}
		return len(screens) == 1
	case Horse:
		switch {
		case adf == 1 && adr == 2:
			return empty(f0, r0+sign(dr))
		case adf == 2 && adr == 1:
			return empty(f0+sign(df), r0)
		}
		return false
	case Elephant:
		sf, sr := sign(df), sign(dr)
		if janggi {
			switch {
			case adf == 2 && adr == 3:
				return empty(f0, r0+sr) && empty(f0+sf, r0+2*sr)
			case adf == 3 && adr == 2:
				return empty(f0+sf, r0) && empty(f0+2*sf, r0+sr)
			}
			return false
		}
		ownSide := r1 <= 4
		if side == Second {
			ownSide = r1 >= 5
		}
		return adf == 2 && adr == 2 && ownSide && empty(f0+sf, r0+sr)
	case Soldier:
		fwd := 1
		if side == Second {
			fwd = -1
		}
		if df == 0 && dr == fwd {
			return true
		}
		if dr == 0 && adf == 1 {
			if janggi {
				return true
			}
			if side == First {
				return r0 >= 5
			}
			return r0 <= 4
		}
		enemy := int(side ^ 1)
		return janggi && adf == 1 && dr == fwd && refPalace(from) == enemy && refPalace(to) == enemy &&
			(refCenter(from) || refCenter(to))
	}
	return false
}

func (rp *refPos) general(s Side) int {
	for sq, pc := range rp.b {
		if pc == mkPiece(s, General) {
			return sq
		}
	}
	return -1
}

// attacked: could a piece of by capture an enemy piece on sq? The square is
// given such a piece for the question (same kind if it held by's own).
func (rp *refPos) attacked(sq int, by Side) bool {
	c := *rp
	switch q := c.b[sq]; {
	case q == NoPiece:
		c.b[sq] = mkPiece(by^1, Soldier)
	case q.Side() == by:
		c.b[sq] = mkPiece(by^1, q.Kind())
	}
	for s := range c.b {
		if c.b[s] != NoPiece && c.b[s].Side() == by && c.canReach(s, sq) {
			return true
		}
	}
	return false
}

func (rp *refPos) facing() bool {
	g0, g1 := rp.general(First), rp.general(Second)
	if g0 < 0 || g1 < 0 || g0%9 != g1%9 {
		return false
	}
	for s := g0 + 9; s < g1; s += 9 {
		if rp.b[s] != NoPiece {
			return false
		}
	}
	return true
}

func (rp *refPos) inCheck() bool {
	g := rp.general(rp.turn)
	return g >= 0 && (rp.attacked(g, rp.turn^1) || (rp.v == Xiangqi && rp.facing()))
}

func (rp *refPos) legal() []string {
	var out []string
	for from, pc := range rp.b {
		if pc == NoPiece || pc.Side() != rp.turn {
			continue
		}
		for to := 0; to < NumSquares; to++ {
			if !rp.canReach(from, to) {
				continue
			}
			c := *rp
			c.b[to], c.b[from] = pc, NoPiece
			if !c.inCheck() {
				out = append(out, mkMove(from, to).String())
			}
		}
	}
	if rp.v == Janggi && !rp.inCheck() {
		g := rp.general(rp.turn)
		out = append(out, mkMove(g, g).String())
	}
	slices.Sort(out)
	return out
}
