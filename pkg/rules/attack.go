package rules

// IsAttacked reports whether a piece of side by could capture a piece of the
// other side standing on sq (if sq is empty: as if one stood there), ignoring
// whether that capture would expose by's own general. In Janggi a cannon on
// sq is never attacked by cannons. The Xiangqi flying-general rule is not an
// attack; see GeneralsFacing.
func (p *Position) IsAttacked(sq Square, by Side) bool {
	if !sq.Valid() || by > Second {
		return false
	}
	return p.attacked(int(sq), by)
}

// attacked walks by's pieces kind by kind (at most 16) and asks the tables
// whether each stands where it could reach sq, then checks the few squares
// that could block it. That is cheaper than scanning every line out of sq.
//
// safe() calls this with a move played on the board but not in the piece
// lists, so an entry may name a square whose piece was just captured: every
// loop checks that the board still holds the piece.
func (p *Position) attacked(sq int, by Side) bool {
	t := p.tb
	b := &p.board
	pl := &p.pl[by]
	pn := &p.pn[by]
	lineTo := &t.lineTo[sq]
	lines := &t.lines[sq]

	chariot := mkPiece(by, Chariot)
	for i := 0; i < int(pn[Chariot]); i++ {
		c := int(pl[Chariot][i])
		d := lineTo[c]
		if d < 0 || b[c] != chariot {
			continue
		}
		r := &lines[d]
		j := 0
		for int(r.sq[j]) != c && b[r.sq[j]] == NoPiece {
			j++
		}
		if int(r.sq[j]) == c {
			return true
		}
	}

	cannon := mkPiece(by, Cannon)
	// Janggi: a cannon never captures a cannon and never jumps one.
	if n := int(pn[Cannon]); n > 0 && (!t.janggi || b[sq].Kind() != Cannon) {
		for i := 0; i < n; i++ {
			c := int(pl[Cannon][i])
			d := lineTo[c]
			if d < 0 || b[c] != cannon {
				continue
			}
			r := &lines[d]
			screens := 0
			for j := 0; int(r.sq[j]) != c; j++ {
				if q := b[r.sq[j]]; q != NoPiece {
					screens++
					if t.janggi && q.Kind() == Cannon {
						screens = 2
					}
					if screens > 1 {
						break
					}
				}
			}
			if screens == 1 {
				return true
			}
		}
	}

	horse := mkPiece(by, Horse)
	legs := &t.horseLeg[sq]
	for i := 0; i < int(pn[Horse]); i++ {
		h := int(pl[Horse][i])
		if leg := legs[h]; leg >= 0 && b[leg] == NoPiece && b[h] == horse {
			return true
		}
	}

	elephant := mkPiece(by, Elephant)
	paths := &t.elephantPath[sq]
	for i := 0; i < int(pn[Elephant]); i++ {
		e := int(pl[Elephant][i])
		if path := paths[e]; path[0] >= 0 && b[path[0]] == NoPiece && b[path[1]] == NoPiece && b[e] == elephant {
			return true
		}
	}

	if pn[Soldier] > 0 {
		soldier := mkPiece(by, Soldier)
		ss := &t.soldierAtk[by][sq]
		for i := 0; i < int(ss.n); i++ {
			if b[ss.sq[i]] == soldier {
				return true
			}
		}
	}

	// Generals and guards never leave their palace, so only a square in by's
	// palace can be reached by them.
	if palaceSide[sq] == int8(by) {
		general, guard := mkPiece(by, General), mkPiece(by, Guard)
		gs := &t.general[sq]
		for i := 0; i < int(gs.n); i++ {
			if b[gs.sq[i]] == general {
				return true
			}
		}
		gs = &t.guard[sq]
		for i := 0; i < int(gs.n); i++ {
			if b[gs.sq[i]] == guard {
				return true
			}
		}
	}
	return false
}
