package engine

import "github.com/palacehq/palace/pkg/rules"

// A Xiangqi side without a legal move loses, in check or not (stalemate).
// A node discovers that when it generates its moves, but stand-pat, reverse
// futility and null-move pruning return before that; before such a cut the
// search asks stalemated, which is cheap in the common case.

// stalemated reports whether the side to move, not in check, is stalemated:
// a Xiangqi loss (a Janggi side not in check always has the pass). It uses
// s.moves[ply] as scratch, so call it only before the node's move list is
// generated.
func (s *searcher) stalemated(ply int) bool {
	if s.janggi || s.quickMove() != rules.NoMove {
		return false
	}
	return len(s.pos.LegalMoves(s.moves[ply][:0])) == 0
}

// A shield is the set of points around a Xiangqi general that a move may
// not touch (leave, enter or capture on) without perhaps exposing it. Only
// the points of the general's file and rank (the lines of chariots, cannons
// and the facing general) and the four points diagonally next to it (the
// legs of horses that would attack it) can: the other side's soldiers
// attack from next to the general whatever else moves, and its elephants
// and advisors never reach it.
type shield [2]uint64

func (sh *shield) add(sq int)     { sh[sq>>6] |= 1 << (sq & 63) }
func (sh shield) has(sq int) bool { return sh[sq>>6]>>(sq&63)&1 != 0 }
func (sh shield) or(o shield) shield {
	return shield{sh[0] | o[0], sh[1] | o[1]}
}

// shields[g] are the parts of the shield of a general on g: ray[d] the
// points of the ray d out of g (geo.ray order), legs its four diagonal
// neighbours, and all of them together with g itself.
var shields = func() *[90]struct {
	ray       [4]shield
	legs, all shield
} {
	t := new([90]struct {
		ray       [4]shield
		legs, all shield
	})
	for g := 0; g < 90; g++ {
		sh := &t[g]
		sh.all.add(g)
		for d := 0; d < 4; d++ {
			for _, sq := range geo.rays[g][d] {
				sh.ray[d].add(int(sq))
			}
			sh.all = sh.all.or(sh.ray[d])
		}
		for _, df := range [2]int{-1, 1} {
			for _, dr := range [2]int{-1, 1} {
				if f, r := g%9+df, g/9+dr; f >= 0 && f < 9 && r >= 0 && r < 10 {
					sh.legs.add(r*9 + f)
				}
			}
		}
		sh.all = sh.all.or(sh.legs)
	}
	return t
}()

// sparseShield narrows the shield of the general on g to what the enemy
// pieces make matter. A move changes the number of pieces between the
// general and an enemy piece on one of its lines by at most one, and not
// in check that number is at least 1 for a chariot or the general and not
// 1 for a cannon; so a line matters only where an enemy chariot or general
// has at most one piece before it, or an enemy cannon at most two. The
// horse legs matter only while the enemy has a horse (a move only removes
// enemy pieces). g itself stays in.
func (s *searcher) sparseShield(g int, them rules.Side) shield {
	t := &shields[g]
	var sh shield
	sh.add(g)
	if s.counts[them][rules.Horse] > 0 {
		sh = sh.or(t.legs)
	}
	gf, gr := g%9, g/9
	for _, sq8 := range s.plist[them][:s.pcount[them]] {
		sq := int(sq8)
		k := s.board[sq].Kind()
		if k != rules.Chariot && k != rules.Cannon && k != rules.General {
			continue
		}
		var d int
		switch f, r := sq%9, sq/9; {
		case f == gf && r > gr:
			d = 0
		case f == gf:
			d = 1
		case r == gr && f < gf:
			d = 2
		case r == gr:
			d = 3
		default:
			continue
		}
		limit := 1
		if k == rules.Cannon {
			limit = 2
		}
		between := 0
		for _, p := range geo.ray[g][d][:geo.nRay[g][d]] {
			if int(p) == sq {
				break
			}
			if s.board[p] != rules.NoPiece {
				between++
			}
		}
		if between <= limit {
			sh = sh.or(t.ray[d])
		}
	}
	return sh
}

// quickMove returns a move of the Xiangqi side to move, not in check, that
// is legal for a reason found without playing it, or rules.NoMove, which
// proves nothing (the caller then generates the moves). It tries moves of
// pieces that touch no point of the general's shield, and then steps of
// the general (see generalStep). The piece that had such a move last time
// usually still has one, so it is tried first, against the whole shield
// (cheap) and then against the part of it the enemy pieces make matter.
func (s *searcher) quickMove() rules.Move {
	us := s.pos.Turn()
	g := int(s.pos.GeneralSquare(us))
	if g < 0 {
		return rules.NoMove
	}
	all := shields[g].all
	hint := int(s.quickFrom[us])
	hinted := s.board[hint] != rules.NoPiece && s.board[hint].Side() == us
	if hinted {
		if to := s.pieceMoveFrom(us, hint, all); to >= 0 {
			return rules.NewMove(rules.Square(hint), rules.Square(to))
		}
	}
	sh := s.sparseShield(g, us^1)
	if hinted && sh != all {
		if to := s.pieceMoveFrom(us, hint, sh); to >= 0 {
			return rules.NewMove(rules.Square(hint), rules.Square(to))
		}
	}
	if m := s.pieceMove(us, sh); m != rules.NoMove {
		return m
	}
	return s.generalStep(us, g)
}

// pieceMove finds a move of a piece of us that touches no point of sh
// (see pieceMoveFrom), and remembers the piece in quickFrom.
func (s *searcher) pieceMove(us rules.Side, sh shield) rules.Move {
	for _, from := range s.plist[us][:s.pcount[us]] {
		if to := s.pieceMoveFrom(us, int(from), sh); to >= 0 {
			s.quickFrom[us] = from
			return rules.NewMove(rules.Square(from), rules.Square(to))
		}
	}
	return rules.NoMove
}

// pieceMoveFrom returns the point a move of the chariot, cannon (not a
// capture), horse, elephant or soldier of us on from may go to, leaving and
// entering only points sh does not guard, or -1: such a move is legal,
// since the side is not in check and nothing it changes bears on an
// attack on the general. Advisors stay in the palace, next to the
// general's lines, and are left to the move generator, as is the general.
func (s *searcher) pieceMoveFrom(us rules.Side, from int, sh shield) int {
	board := &s.board
	ok := func(to int) bool { // empty or an enemy piece, and unguarded
		q := board[to]
		return (q == rules.NoPiece || q.Side() != us) && !sh.has(to)
	}
	k := board[from].Kind()
	if k == rules.Guard || k == rules.General || sh.has(from) {
		return -1
	}
	switch k {
	case rules.Chariot, rules.Cannon:
		for d := 0; d < 4; d++ {
			ray := &geo.ray[from][d]
			for j := 0; j < int(geo.nRay[from][d]); j++ {
				to := int(ray[j])
				if q := board[to]; q != rules.NoPiece {
					// A chariot may take the first piece; a cannon's
					// captures are not worth looking for.
					if k == rules.Chariot && ok(to) {
						return to
					}
					break
				}
				if !sh.has(to) {
					return to
				}
			}
		}
	case rules.Horse:
		for _, h := range geo.horse[from] {
			if board[h.leg] == rules.NoPiece && ok(int(h.to)) {
				return int(h.to)
			}
		}
	case rules.Elephant:
		for _, e := range geo.elephant[rules.Xiangqi][from] {
			to := int(e[0])
			// An elephant stays on its own side of the river.
			own := to/9 <= 4
			if us == rules.Second {
				own = to/9 >= 5
			}
			if own && board[e[1]] == rules.NoPiece && ok(to) {
				return to
			}
		}
	case rules.Soldier:
		r, f := from/9, from%9
		fwd, crossed := 9, r >= 5
		if us == rules.Second {
			fwd, crossed = -9, r <= 4
		}
		if to := from + fwd; to >= 0 && to < 90 && ok(to) {
			return to
		}
		if crossed {
			if f > 0 && ok(from-1) {
				return from - 1
			}
			if f < 8 && ok(from+1) {
				return from + 1
			}
		}
	}
	return -1
}

// generalStep finds a step of the general of us, on g and not in check, to
// a point that is not attacked and not facing the enemy general. Not in
// check, the general is seen by no enemy chariot, cannon or general, so a
// step along one of its lines cannot walk into one of them; IsAttacked
// with the general still on g, and a scan of the file between the new
// point and the enemy general with g still occupied, are therefore exact
// for the new point (g is no horse leg for a point next to it).
func (s *searcher) generalStep(us rules.Side, g int) rules.Move {
	them := us ^ 1
	eg := int(s.pos.GeneralSquare(them))
	for _, step := range [4]int{1, -1, 9, -9} {
		to := g + step
		if to < 0 || to >= 90 {
			continue
		}
		if f, r := to%9, to/9; f < 3 || f > 5 || (us == rules.First && r > 2) || (us == rules.Second && r < 7) {
			continue // outside the palace
		}
		if q := s.board[to]; q != rules.NoPiece && q.Side() == us {
			continue
		}
		if s.pos.IsAttacked(rules.Square(to), them) {
			continue
		}
		if eg >= 0 && eg%9 == to%9 {
			open := true
			for q := min(to, eg) + 9; q < max(to, eg); q += 9 {
				if s.board[q] != rules.NoPiece {
					open = false
					break
				}
			}
			if open {
				continue
			}
		}
		return rules.NewMove(rules.Square(g), rules.Square(to))
	}
	return rules.NoMove
}
