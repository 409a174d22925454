package rules

import "slices"

// Perpetual chase (Xiangqi), docs/rules.md: a move chases a piece when, after it,
// a chariot, horse, cannon, elephant or advisor of the mover attacks that
// piece (not the general, not a soldier still on its own side of the
// river), did not attack it before the move, and the piece is unprotected:
// no piece of its owner could legally recapture on its square.
//
// How this file reads the definition:
//   - "attacks" means a legal capture: the capture must not leave the
//     chaser's own general attacked or facing the other general. A pinned
//     piece threatens nothing.
//   - "it did not attack it before" is about that attacker and that target
//     as pieces, so a piece is followed when it moves; the pieces are named
//     at the first occurrence of the repeated position. Before the move an
//     attack is read the same way, so a move that unpins a piece makes its
//     threats new; when the mover is in check, the check is set aside: a
//     piece that already bore on the target, unpinned, attacked it (a king
//     stepping out of check chases nothing its chariot had in sight all
//     along).
//   - "protected" is tested on the board after that very capture, since
//     the capture itself can open or close a recapturing line.
//   - A chaser loses when it chased one and the same piece on every one of
//     its moves in the cycle (by whichever attackers), and the other player did not give check or
//     chase (any piece) on every one of its moves; a cycle in which both
//     sides force on every move is a draw.
//
// Chases are only needed once per game, when a position occurs for the
// third time, so they are computed then by replaying the cycle, not on
// every ply.

// perpetualChaser replays the plies after ply first up to now and returns
// the side that loses by perpetual chase, if any.
func (g *Game) perpetualChaser(first int) (Side, bool) {
	q := g.start.Clone()
	for _, m := range g.moves[:first] {
		q.Make(m)
	}
	checks := make([]bool, 0, len(g.moves)-first)
	for k := first + 1; k <= len(g.moves); k++ {
		checks = append(checks, g.plies[k-1].check)
	}
	return PerpetualChaser(q, g.moves[first:], checks)
}

// PerpetualChaser returns the side that loses by perpetual chase in a
// Xiangqi cycle: moves played from at, the position of the cycle's first
// occurrence, to its repetition, where checks[i] tells whether moves[i]
// gave check. ok is false when neither side loses by it. at is not
// changed. A search uses it on the cycles it plays into, as the game does
// on the ones it ends on.
func PerpetualChaser(at *Position, moves []Move, checks []bool) (loser Side, ok bool) {
	q := at.Clone()
	// Name the pieces; a side has at most 16, so 32 ids fit a uint32 set.
	var ids [NumSquares]int8
	next := int8(0)
	for sq := range ids {
		ids[sq] = -1
		if q.PieceAt(Square(sq)) != NoPiece {
			ids[sq] = next
			next++
		}
	}
	same := [2]uint32{^uint32(0), ^uint32(0)}
	forcing := [2]bool{true, true}
	for i, m := range moves {
		s := q.Turn()
		c := chases(q, m, &ids)
		same[s] &= c
		forcing[s] = forcing[s] && (c != 0 || checks[i])
		q.Make(m)
		ids[m.To()], ids[m.From()] = ids[m.From()], -1
	}
	for s := First; s <= Second; s++ {
		if same[s] != 0 && !forcing[s.Opponent()] {
			return s, true
		}
	}
	return 0, false
}

// chases returns the set of ids of the pieces that m, a legal move of the
// side to move in p, chases. p is not changed.
func chases(p *Position, m Move, ids *[NumSquares]int8) uint32 {
	var before [32]uint32 // before[attacker id] = ids it bore on
	var buf [128]Move
	if p.InCheck() {
		// Not p.LegalMoves: in check it holds only the evasions, and every
		// attack that does not end the check would look new after the move.
		// So the check is set aside, and nothing else: a pinned piece
		// attacks nothing here either.
		checkers := bearingOn(p, int(p.GeneralSquare(p.Turn())), p.Turn()^1)
		for from := range NumSquares {
			a := p.board[from]
			if a == NoPiece || a.Side() != p.Turn() {
				continue
			}
			for to := range NumSquares {
				c := NewMove(Square(from), Square(to))
				if chaseCapture(p, c) && p.patternError(from, to) == "" && safeButForTheCheck(p, c, checkers) {
					before[ids[from]] |= 1 << uint(ids[to])
				}
			}
		}
	} else {
		for _, c := range p.LegalMoves(buf[:0]) {
			if chaseCapture(p, c) {
				before[ids[c.From()]] |= 1 << uint(ids[c.To()])
			}
		}
	}
	idAt := func(sq Square) int8 {
		switch sq {
		case m.To():
			return ids[m.From()]
		case m.From():
			return -1
		}
		return ids[sq]
	}
	after := p.Clone()
	after.Make(m)
	// Hand the turn back to the mover (a null move: Make of from == to only
	// changes the side to move), so its legal moves are the threats.
	g := after.GeneralSquare(after.Turn())
	after.Make(NewMove(g, g))
	var chased uint32
	for _, c := range after.LegalMoves(buf[:0]) {
		if !chaseCapture(after, c) {
			continue
		}
		a, t := idAt(c.From()), uint(idAt(c.To()))
		if before[a]&(1<<t) != 0 || chased&(1<<t) != 0 {
			continue
		}
		if !recapturable(after, c) {
			chased |= 1 << t
		}
	}
	return chased
}

// bearingOn returns the squares of the pieces of side by that could move
// onto sq by their own movement rules.
func bearingOn(p *Position, sq int, by Side) []int {
	var out []int
	for s := range NumSquares {
		if pc := p.board[s]; pc != NoPiece && pc.Side() == by && p.patternError(s, sq) == "" {
			out = append(out, s)
		}
	}
	return out
}

// safeButForTheCheck reports whether c, by the side to move in p, leaves its
// general attacked by no piece but checkers (those that check it in p) and
// facing no general: whether c would be legal were it not for the check.
func safeButForTheCheck(p *Position, c Move, checkers []int) bool {
	side := p.Turn()
	q := p.Clone()
	q.Make(c)
	g := int(q.GeneralSquare(side))
	for _, a := range bearingOn(q, g, side^1) {
		if !slices.Contains(checkers, a) {
			return false
		}
	}
	return !q.GeneralsFacing()
}

// chaseCapture reports whether c is a capture that can count as a chase: by
// a chariot, horse, cannon, elephant or advisor, of a piece other than the
// general or a soldier that has not crossed the river.
func chaseCapture(p *Position, c Move) bool {
	attacker, target := p.PieceAt(c.From()), p.PieceAt(c.To())
	if target == NoPiece || target.Side() == attacker.Side() {
		return false
	}
	switch attacker.Kind() {
	case Chariot, Horse, Cannon, Elephant, Guard:
	default:
		return false
	}
	switch target.Kind() {
	case General:
		return false
	case Soldier:
		return crossedRiver(target.Side(), c.To())
	}
	return true
}

// recapturable reports whether, after the capture c, the captured piece's
// owner has a legal move onto c's destination.
func recapturable(p *Position, c Move) bool {
	r := p.Clone()
	r.Make(c)
	var buf [128]Move
	for _, m := range r.LegalMoves(buf[:0]) {
		if m.To() == c.To() {
			return true
		}
	}
	return false
}

// crossedRiver reports whether sq is on the far side of the river for s.
func crossedRiver(s Side, sq Square) bool {
	if s == First {
		return sq.Rank() >= 5
	}
	return sq.Rank() <= 4
}
