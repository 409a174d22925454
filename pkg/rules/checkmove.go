package rules

import "fmt"

func illegal(m Move, format string, args ...any) error {
	return &MoveError{Move: m, Reason: fmt.Sprintf(format, args...)}
}

// CheckMove returns nil if m is legal in p, else a *MoveError (wrapping
// ErrIllegalMove) whose text names the move and says what is wrong, e.g.
// "move h1h9: the chariot's path is blocked at h4". It agrees with
// LegalMoves exactly and does not modify p, so unlike LegalMoves it may run
// concurrently with other readers.
func (p *Position) CheckMove(m Move) error {
	if !m.valid() {
		return illegal(m, "not a move on the board")
	}
	from, to := int(m.From()), int(m.To())
	pc := p.board[from]
	if pc == NoPiece {
		return illegal(m, "there is no piece on %v", Square(from))
	}
	name := pc.Kind().displayName(p.variant)
	if pc.Side() != p.turn {
		if from == to && pc.Kind() == General {
			own := p.GeneralSquare(p.turn)
			return illegal(m, "%v holds %s's general: %s passes with its own general's square twice, %v%v",
				Square(from), SideName(p.variant, pc.Side()), SideName(p.variant, p.turn), own, own)
		}
		return illegal(m, "the %s on %v belongs to the opponent: %s is to move", name, Square(from), SideName(p.variant, p.turn))
	}
	if from == to {
		switch {
		case p.variant != Janggi:
			return illegal(m, "passing is not allowed in %v", p.variant)
		case pc.Kind() != General:
			return illegal(m, "a pass is the general's square twice, but %v holds the %s", Square(from), name)
		case p.InCheck():
			return illegal(m, "cannot pass while in check")
		}
		return nil
	}
	if reason := p.patternError(from, to); reason != "" {
		return illegal(m, "%s", reason)
	}
	c := p.Clone()
	c.Make(m)
	us, them := p.turn, p.turn^1
	g := int(c.general[us])
	if p.variant == Xiangqi && c.facing(g, int(c.general[them])) {
		return illegal(m, "the generals would face each other on the %c-file", 'a'+byte(g%NumFiles))
	}
	if c.attacked(g, them) {
		if s := c.attackerOf(g, them); s >= 0 {
			return illegal(m, "leaves the general in check from the %s on %v", c.board[s].Kind().displayName(p.variant), Square(s))
		}
		return illegal(m, "leaves the general in check")
	}
	return nil
}

// attackerOf names one piece of side by that attacks sq, for messages.
func (p *Position) attackerOf(sq int, by Side) int {
	for k := General; k <= Soldier; k++ {
		for _, s := range p.pl[by][k][:p.pn[by][k]] {
			if p.patternError(int(s), sq) == "" {
				return int(s)
			}
		}
	}
	return -1
}

func (s *stepSet) contains(sq int) bool {
	for _, x := range s.sq[:s.n] {
		if int(x) == sq {
			return true
		}
	}
	return false
}

// patternError says why the piece on from (of either side) cannot go to to
// by its own movement rule, or returns "" if it can. It ignores whose turn it
// is and whether the general would be left attacked.
func (p *Position) patternError(from, to int) string {
	t := p.tb
	b := &p.board
	pc := b[from]
	k, side := pc.Kind(), pc.Side()
	name := "the " + k.displayName(p.variant)
	q := b[to]
	capture := q != NoPiece
	own := capture && q.Side() == side
	cannot := func(how string) string { return name + " cannot move like that (it moves " + how + ")" }

	switch k {
	case General, Guard:
		steps := &t.general[from]
		if k == Guard {
			steps = &t.guard[from]
		}
		if !steps.contains(to) {
			if palaceOf(to) != int(side) {
				return name + " cannot leave its palace"
			}
			switch {
			case t.janggi:
				return cannot("one point along the palace lines")
			case k == General:
				return cannot("one point orthogonally")
			}
			return cannot("one point diagonally along the palace lines")
		}

	case Chariot, Cannon:
		d := t.lineTo[from][to]
		if d < 0 {
			if t.janggi {
				return cannot("along a file, a rank or a palace diagonal")
			}
			return cannot("along a file or a rank")
		}
		var between []Square
		r := &t.lines[from][d]
		for j := 0; int(r.sq[j]) != to; j++ {
			if b[r.sq[j]] != NoPiece {
				between = append(between, Square(r.sq[j]))
			}
		}
		if k == Chariot {
			if len(between) > 0 {
				return fmt.Sprintf("the chariot's path is blocked at %v", between[0])
			}
			break
		}
		if own {
			return fmt.Sprintf("cannot capture your own %s on %v", q.Kind().displayName(p.variant), Square(to))
		}
		if t.janggi {
			switch {
			case len(between) == 0:
				return "the cannon needs a screen to jump over"
			case b[between[0]].Kind() == Cannon:
				return fmt.Sprintf("the cannon cannot jump over a cannon (on %v)", between[0])
			case len(between) > 1:
				return fmt.Sprintf("the cannon must jump exactly one piece, but %v and %v are in the way", between[0], between[1])
			case q.Kind() == Cannon:
				return "the cannon cannot capture a cannon"
			}
			break
		}
		switch {
		case !capture && len(between) > 0:
			return fmt.Sprintf("the cannon's path is blocked at %v (it jumps only to capture)", between[0])
		case capture && len(between) == 0:
			return "the cannon needs a screen to capture"
		case capture && len(between) > 1:
			return fmt.Sprintf("the cannon must jump exactly one piece to capture, but %v and %v are in the way", between[0], between[1])
		}

	case Horse:
		leg := t.horseLeg[to][from]
		if leg < 0 {
			return cannot("one point orthogonally, then one diagonally outward")
		}
		if b[leg] != NoPiece {
			return fmt.Sprintf("the horse is blocked at %v", Square(leg))
		}

	case Elephant:
		path := t.elephantPath[to][from]
		if path[0] < 0 {
			df, dr := iabs(to%NumFiles-from%NumFiles), iabs(to/NumFiles-from/NumFiles)
			if t.janggi {
				return cannot("one point orthogonally, then two diagonally outward")
			}
			if df == 2 && dr == 2 && !ownHalf(side, to) {
				return "the elephant cannot cross the river"
			}
			return cannot("exactly two points diagonally")
		}
		for _, s := range path {
			if b[s] != NoPiece {
				return fmt.Sprintf("the elephant is blocked at %v", Square(s))
			}
		}

	case Soldier:
		if !t.soldier[side][from].contains(to) {
			fwd := to/NumFiles - from/NumFiles
			if side == Second {
				fwd = -fwd
			}
			sideways := fwd == 0 && iabs(to%NumFiles-from%NumFiles) == 1
			switch {
			case fwd < 0:
				return "the soldier cannot move backward"
			case sideways && !t.janggi:
				return "the soldier cannot move sideways before crossing the river"
			case t.janggi:
				return cannot("one point forward or sideways, or diagonally forward along a diagonal of the enemy palace")
			}
			return cannot("one point forward, or sideways once across the river")
		}
	}
	if own {
		return fmt.Sprintf("cannot capture your own %s on %v", q.Kind().displayName(p.variant), Square(to))
	}
	return ""
}
