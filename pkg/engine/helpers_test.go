package engine

import (
	"testing"

	"github.com/palacehq/palace/pkg/rules"
)

func mustFEN(t testing.TB, v rules.Variant, fen string) *rules.Position {
	t.Helper()
	p, err := rules.ParseFEN(v, fen)
	if err != nil {
		t.Fatalf("ParseFEN(%v, %q): %v", v, fen, err)
	}
	return p
}

func mustMoves(t testing.TB, ss ...string) []rules.Move {
	t.Helper()
	out := make([]rules.Move, 0, len(ss))
	for _, s := range ss {
		m, err := rules.ParseMove(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// bruteState is what the brute-force solver tracks of the game's history:
// only the endings that can happen within a few plies of a FEN (two passes,
// bikjang, no legal move); repetition needs more plies than it searches.
type bruteState struct {
	caps   int
	facing bool // generals faced after the last ply
	passed bool // the last ply was a pass
	plies  int
	// mateOnly scores every ending on points as a loss for attacker, so
	// that only checkmate (or Xiangqi stalemate) wins.
	mateOnly bool
	attacker rules.Side
}

// bruteEnded applies the endings after move m (with undo u) was made on p.
// It reports whether the game ended and whether the side that just moved
// won.
func bruteEnded(p *rules.Position, m rules.Move, u rules.Undo, prev bruteState) (bruteState, bool, bool) {
	mover := p.Turn() ^ 1
	st := prev
	st.passed, st.plies = m.IsPass(), prev.plies+1
	st.facing = false
	points := func() bool {
		if st.mateOnly {
			return mover != st.attacker
		}
		return p.Points(mover) > p.Points(mover^1)
	}
	if u.Captured != rules.NoPiece {
		st.caps++
	}
	janggi := p.Variant() == rules.Janggi
	if janggi {
		st.facing = p.GeneralsFacing()
		if st.passed && prev.passed && prev.plies > 0 {
			return st, true, points()
		}
	}
	var buf [256]rules.Move
	if len(p.LegalMoves(buf[:0])) == 0 {
		return st, true, true
	}
	if janggi && st.facing && prev.facing && prev.plies > 0 && st.caps > 0 {
		return st, true, points()
	}
	return st, false, false
}

// forcedWin reports whether the side to move can force a win (mate, or any
// decided ending in its favour) within n of its moves, without passing.
func forcedWin(p *rules.Position, n int, st bruteState) bool {
	if n <= 0 {
		return false
	}
	var buf [256]rules.Move
	for _, m := range p.LegalMoves(buf[:0]) {
		if m.IsPass() {
			continue
		}
		u := p.Make(m)
		if n == 1 && p.Variant() == rules.Janggi && !p.InCheck() && !p.GeneralsFacing() {
			// In Janggi a move that neither checks nor leaves the
			// generals facing cannot end the game at once (there is no
			// stalemate, and the attacker does not pass).
			p.Unmake(m, u)
			continue
		}
		ns, ended, won := bruteEnded(p, m, u, st)
		ok := false
		if ended {
			ok = won
		} else if n > 1 {
			ok = allRepliesLose(p, n-1, ns)
		}
		p.Unmake(m, u)
		if ok {
			return true
		}
	}
	return false
}

// allRepliesLose: every reply of the side to move lets the opponent force a
// win within n of its moves.
func allRepliesLose(p *rules.Position, n int, st bruteState) bool {
	var buf [256]rules.Move
	for _, r := range p.LegalMoves(buf[:0]) {
		u := p.Make(r)
		ns, ended, won := bruteEnded(p, r, u, st)
		ok := false
		if ended {
			ok = !won
		} else {
			ok = forcedWin(p, n, ns)
		}
		p.Unmake(r, u)
		if !ok {
			return false
		}
	}
	return true
}

// exactMateIn reports the smallest n <= max for which the side to move
// forces a win, or 0.
func exactMateIn(p *rules.Position, max int, mateOnly bool) int {
	q := p.Clone()
	for n := 1; n <= max; n++ {
		if forcedWin(q, n, bruteState{mateOnly: mateOnly, attacker: p.Turn()}) {
			return n
		}
	}
	return 0
}

// moveMatesIn reports whether m, by the side to move, forces a win within n
// moves (m included).
func moveMatesIn(p *rules.Position, m rules.Move, n int) bool {
	q := p.Clone()
	u := q.Make(m)
	ns, ended, won := bruteEnded(q, m, u, bruteState{attacker: p.Turn()})
	if ended {
		return won
	}
	return n > 1 && allRepliesLose(q, n-1, ns)
}

// checkIncremental compares the searcher's incrementally kept board and
// scores with a recomputation from the position.
func checkIncremental(t *testing.T, s *searcher) {
	t.Helper()
	var psq [2]int32
	var counts [2][8]int8
	for sq := 0; sq < 90; sq++ {
		pc := s.pos.PieceAt(rules.Square(sq))
		if s.board[sq] != pc {
			t.Fatalf("board mirror differs on %v: %v vs %v (%s)", rules.Square(sq), s.board[sq], pc, s.pos.FEN())
		}
		if pc != rules.NoPiece {
			psq[pc.Side()] += int32(psqValue(s.variant, pc, sq))
			counts[pc.Side()][pc.Kind()]++
		}
	}
	for side := range s.plist {
		for i, sq := range s.plist[side][:s.pcount[side]] {
			if pc := s.board[sq]; pc == rules.NoPiece || pc.Side() != rules.Side(side) || int(s.pindex[sq]) != i {
				t.Fatalf("piece list of side %d: slot %d holds %v (%v, index %d)", side, i, rules.Square(sq), pc, s.pindex[sq])
			}
		}
	}
	if n := int(s.pcount[0]) + int(s.pcount[1]); n != int(sumCounts(counts)) {
		t.Fatalf("piece lists hold %d pieces, board %d", n, sumCounts(counts))
	}
	if psq != s.psq || counts != s.counts {
		t.Fatalf("incremental psq %v counts %v, recomputed %v %v", s.psq, s.counts, psq, counts)
	}
	if s.top().hash != s.pos.Hash() {
		t.Fatalf("state hash differs from position hash")
	}
}

func sumCounts(c [2][8]int8) (n int) {
	for _, side := range c {
		for _, k := range side {
			n += int(k)
		}
	}
	return n
}
