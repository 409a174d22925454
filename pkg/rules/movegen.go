package rules

// LegalMoves appends the legal moves of the side to move to dst and returns
// it (Janggi: the pass last, when not in check). Order is unspecified but
// deterministic for a given history. It does not allocate when dst has room.
//
// Moves are generated piece by piece and each is tested for legality only
// when it can matter: when in check, when the general moves, or when the move
// empties or fills a square of the shield mask (see shieldMask). No other
// move can expose the general: the opponent's pieces stay where they are,
// and only their lines, horse legs and elephant paths could open.
func (p *Position) LegalMoves(dst []Move) []Move {
	t := p.tb
	b := &p.board
	us := p.turn
	them := us ^ 1
	ownBit := Piece(us) << 3
	pl := &p.pl[us]
	pn := &p.pn[us]
	g := int(p.general[us])
	inCheck := false
	var sens sqMask
	if g >= 0 {
		inCheck = p.attacked(g, them) || (!t.janggi && p.facing(g, int(p.general[them])))
		if inCheck {
			sens = sqMask{^uint64(0), ^uint64(0)}
		} else {
			sens = p.shieldMask(g, them)
		}
	}

	for i := 0; i < int(pn[Chariot]); i++ {
		from := int(pl[Chariot][i])
		test := sens.has(from)
		lines := &t.lines[from]
		for d := 0; d < int(t.nLines[from]); d++ {
			r := &lines[d]
			for j := 0; j < int(r.n); j++ {
				to := int(r.sq[j])
				q := b[to]
				if q != NoPiece && q&8 == ownBit {
					break
				}
				if !(test || sens.has(to)) || p.safe(from, to, g, them) {
					dst = append(dst, mkMove(from, to))
				}
				if q != NoPiece {
					break
				}
			}
		}
	}

	for i := 0; i < int(pn[Cannon]); i++ {
		from := int(pl[Cannon][i])
		test := sens.has(from)
		lines := &t.lines[from]
		if t.janggi {
			for d := 0; d < int(t.nLines[from]); d++ {
				r := &lines[d]
				n := int(r.n)
				j := 0
				for j < n && b[r.sq[j]] == NoPiece {
					j++
				}
				if j == n || b[r.sq[j]].Kind() == Cannon {
					continue // no screen, or a cannon, which may not be jumped
				}
				for j++; j < n; j++ {
					to := int(r.sq[j])
					q := b[to]
					if q != NoPiece && (q&8 == ownBit || q.Kind() == Cannon) {
						break
					}
					if !(test || sens.has(to)) || p.safe(from, to, g, them) {
						dst = append(dst, mkMove(from, to))
					}
					if q != NoPiece {
						break
					}
				}
			}
			continue
		}
		for d := 0; d < 4; d++ {
			r := &lines[d]
			n := int(r.n)
			j := 0
			for ; j < n; j++ {
				to := int(r.sq[j])
				if b[to] != NoPiece {
					break
				}
				if !(test || sens.has(to)) || p.safe(from, to, g, them) {
					dst = append(dst, mkMove(from, to))
				}
			}
			for j++; j < n; j++ {
				to := int(r.sq[j])
				q := b[to]
				if q == NoPiece {
					continue
				}
				if q&8 != ownBit && (!(test || sens.has(to)) || p.safe(from, to, g, them)) {
					dst = append(dst, mkMove(from, to))
				}
				break
			}
		}
	}

	for i := 0; i < int(pn[Horse]); i++ {
		from := int(pl[Horse][i])
		test := sens.has(from)
		hs := &t.horse[from]
		for k := 0; k < int(hs.n); k++ {
			l := &hs.l[k]
			to := int(l.to)
			q := b[to]
			if b[l.b1] != NoPiece || (q != NoPiece && q&8 == ownBit) {
				continue
			}
			if !(test || sens.has(to)) || p.safe(from, to, g, them) {
				dst = append(dst, mkMove(from, to))
			}
		}
	}

	for i := 0; i < int(pn[Elephant]); i++ {
		from := int(pl[Elephant][i])
		test := sens.has(from)
		es := &t.elephant[us][from]
		for k := 0; k < int(es.n); k++ {
			l := &es.l[k]
			to := int(l.to)
			q := b[to]
			if b[l.b1] != NoPiece || b[l.b2] != NoPiece || (q != NoPiece && q&8 == ownBit) {
				continue
			}
			if !(test || sens.has(to)) || p.safe(from, to, g, them) {
				dst = append(dst, mkMove(from, to))
			}
		}
	}

	for i := 0; i < int(pn[Soldier]); i++ {
		from := int(pl[Soldier][i])
		test := sens.has(from)
		ss := &t.soldier[us][from]
		for k := 0; k < int(ss.n); k++ {
			to := int(ss.sq[k])
			q := b[to]
			if q != NoPiece && q&8 == ownBit {
				continue
			}
			if !(test || sens.has(to)) || p.safe(from, to, g, them) {
				dst = append(dst, mkMove(from, to))
			}
		}
	}

	for i := 0; i < int(pn[Guard]); i++ {
		from := int(pl[Guard][i])
		test := sens.has(from)
		gs := &t.guard[from]
		for k := 0; k < int(gs.n); k++ {
			to := int(gs.sq[k])
			q := b[to]
			if q != NoPiece && q&8 == ownBit {
				continue
			}
			if !(test || sens.has(to)) || p.safe(from, to, g, them) {
				dst = append(dst, mkMove(from, to))
			}
		}
	}

	if g >= 0 {
		gs := &t.general[g]
		for k := 0; k < int(gs.n); k++ {
			to := int(gs.sq[k])
			q := b[to]
			if q != NoPiece && q&8 == ownBit {
				continue
			}
			if p.safe(g, to, g, them) {
				dst = append(dst, mkMove(g, to))
			}
		}
		if t.janggi && !inCheck {
			dst = append(dst, mkMove(g, g))
		}
	}
	return dst
}

// safe plays from-to on the board alone (no lists, no hash), tests whether
// the mover's general (on g, or on to if it moved) is attacked or, in
// Xiangqi, faces the other general, and takes the move back.
func (p *Position) safe(from, to, g int, them Side) bool {
	b := &p.board
	pc, captured := b[from], b[to]
	b[to], b[from] = pc, NoPiece
	if from == g {
		g = to
	}
	ok := !p.attacked(g, them) && (p.tb.janggi || !p.facing(g, int(p.general[them])))
	b[from], b[to] = pc, captured
	return ok
}

// sqMask is a set of squares, one bit each.
type sqMask [2]uint64

func (m *sqMask) set(s int)     { m[s>>6&1] |= 1 << (s & 63) }
func (m sqMask) has(s int) bool { return m[s>>6&1]>>(s&63)&1 != 0 }

// shieldMask returns the squares whose emptying or filling could expose the
// general on g to side them: the squares between g and each enemy chariot or
// cannon on one of g's lines (and, in Xiangqi, the enemy general on its file),
// and the leg or blocking points of enemy horses and elephants that stand
// where they would attack g if unblocked. A capture only removes an enemy
// piece; where that matters (a cannon that was the screen of a cannon) the
// square lies between g and the farther cannon, so it is in the mask.
func (p *Position) shieldMask(g int, them Side) sqMask {
	t := p.tb
	var m sqMask
	lineTo := &t.lineTo[g]
	for _, k := range [2]Kind{Chariot, Cannon} {
		for i := 0; i < int(p.pn[them][k]); i++ {
			s := int(p.pl[them][k][i])
			if d := lineTo[s]; d >= 0 {
				r := &t.lines[g][d]
				for j := 0; int(r.sq[j]) != s; j++ {
					m.set(int(r.sq[j]))
				}
			}
		}
	}
	if !t.janggi {
		if eg := int(p.general[them]); eg >= 0 && eg%NumFiles == g%NumFiles {
			step := NumFiles
			if eg < g {
				step = -NumFiles
			}
			for s := g + step; s != eg; s += step {
				m.set(s)
			}
		}
	}
	for i := 0; i < int(p.pn[them][Horse]); i++ {
		if leg := t.horseLeg[g][p.pl[them][Horse][i]]; leg >= 0 {
			m.set(int(leg))
		}
	}
	for i := 0; i < int(p.pn[them][Elephant]); i++ {
		if path := t.elephantPath[g][p.pl[them][Elephant][i]]; path[0] >= 0 {
			m.set(int(path[0]))
			m.set(int(path[1]))
		}
	}
	return m
}
