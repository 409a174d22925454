package rules

// Precomputed, read-only move geometry, one set per variant. Everything the
// move generator and the attack test need about the board's shape is looked
// up here, so the hot loops never compute coordinates or test board edges.

// sqRay lists the squares from a square outward along one line, nearest first.
type sqRay struct {
	n  uint8
	sq [NumRanks - 1]int8
}

// leap is a horse or elephant move: the destination and the points that must
// be empty. b2 == b1 when there is only one (horse leg, Xiangqi elephant eye).
type leap struct{ to, b1, b2 int8 }

type leapSet struct {
	n uint8
	l [8]leap
}

type stepSet struct {
	n  uint8
	sq [8]int8
}

type tables struct {
	variant Variant
	janggi  bool
	// lines[sq][:nLines[sq]]: the 4 orthogonal rays (up, down, left, right),
	// then in Janggi the palace-diagonal rays, which chariots and cannons share.
	nLines [NumSquares]uint8
	lines  [NumSquares][8]sqRay
	horse  [NumSquares]leapSet
	// horseAtk[sq] lists the horses that could reach sq: l.to is the horse's
	// square, l.b1 its leg. Geometry is symmetric, so it is horse reversed.
	horseAtk    [NumSquares]leapSet
	elephant    [2][NumSquares]leapSet
	elephantAtk [2][NumSquares]leapSet
	soldier     [2][NumSquares]stepSet
	soldierAtk  [2][NumSquares]stepSet
	general     [NumSquares]stepSet // steps are symmetric: also the attackers
	guard       [NumSquares]stepSet
	// lineTo[g][s] is the index in lines[g] of the ray that reaches s, or -1.
	lineTo [NumSquares][NumSquares]int8
	// horseLeg[sq][h] is the leg a horse on h needs empty to reach sq, or -1
	// if no horse move leads from h to sq. elephantPath is the same for
	// elephants (Xiangqi: both points are the eye; the river is checked
	// apart). The attack test looks these up per enemy piece.
	horseLeg     [NumSquares][NumSquares]int8
	elephantPath [NumSquares][NumSquares][2]int8
}

var (
	janggiTables  = buildTables(Janggi)
	xiangqiTables = buildTables(Xiangqi)
)

func tablesFor(v Variant) *tables {
	switch v {
	case Janggi:
		return janggiTables
	case Xiangqi:
		return xiangqiTables
	}
	return nil
}

func sqAt(f, r int) int { return int(SquareAt(f, r)) }

// palaceDiagonals are the four palace lines that run diagonally, in order.
var palaceDiagonals = [4][3]int{
	{3 + 0*9, 4 + 1*9, 5 + 2*9}, // d1 e2 f3
	{5 + 0*9, 4 + 1*9, 3 + 2*9}, // f1 e2 d3
	{3 + 7*9, 4 + 8*9, 5 + 9*9}, // d8 e9 f10
	{5 + 7*9, 4 + 8*9, 3 + 9*9}, // f8 e9 d10
}

// palaceDiagStep reports whether a and b are neighbours on a palace diagonal.
func palaceDiagStep(a, b int) bool {
	for _, l := range palaceDiagonals {
		for i := 0; i < 2; i++ {
			if (l[i] == a && l[i+1] == b) || (l[i] == b && l[i+1] == a) {
				return true
			}
		}
	}
	return false
}

func sign(x int) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

func iabs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func (s *stepSet) add(sq int) {
	s.sq[s.n] = int8(sq)
	s.n++
}

func (s *leapSet) add(to, b1, b2 int) {
	s.l[s.n] = leap{int8(to), int8(b1), int8(b2)}
	s.n++
}

func buildTables(v Variant) *tables {
	t := &tables{variant: v, janggi: v == Janggi}
	dfs := [4]int{0, 0, -1, 1}
	drs := [4]int{1, -1, 0, 0}
	for sq := 0; sq < NumSquares; sq++ {
		f, r := sq%NumFiles, sq/NumFiles
		for d := 0; d < 4; d++ {
			ray := &t.lines[sq][d]
			for k := 1; ; k++ {
				s := sqAt(f+k*dfs[d], r+k*drs[d])
				if s < 0 {
					break
				}
				ray.sq[ray.n] = int8(s)
				ray.n++
			}
		}
		t.nLines[sq] = 4
		if t.janggi {
			for _, l := range palaceDiagonals {
				for i, s := range l {
					if s != sq {
						continue
					}
					if i < 2 {
						ray := &t.lines[sq][t.nLines[sq]]
						for _, s2 := range l[i+1:] {
							ray.sq[ray.n] = int8(s2)
							ray.n++
						}
						t.nLines[sq]++
					}
					if i > 0 {
						ray := &t.lines[sq][t.nLines[sq]]
						for j := i - 1; j >= 0; j-- {
							ray.sq[ray.n] = int8(l[j])
							ray.n++
						}
						t.nLines[sq]++
					}
				}
			}
		}

		for _, o := range [8][2]int{{1, 2}, {-1, 2}, {1, -2}, {-1, -2}, {2, 1}, {2, -1}, {-2, 1}, {-2, -1}} {
			to := sqAt(f+o[0], r+o[1])
			if to < 0 {
				continue
			}
			// The horse first steps one point along the longer leg.
			leg := sqAt(f+o[0]/2, r+o[1]/2)
			t.horse[sq].add(to, leg, leg)
		}

		for side := First; side <= Second; side++ {
			es := &t.elephant[side][sq]
			if t.janggi {
				for _, o := range [8][2]int{{2, 3}, {-2, 3}, {2, -3}, {-2, -3}, {3, 2}, {3, -2}, {-3, 2}, {-3, -2}} {
					to := sqAt(f+o[0], r+o[1])
					if to < 0 {
						continue
					}
					sf, sr := sign(o[0]), sign(o[1])
					var b1, b2 int
					if iabs(o[1]) == 3 {
						b1, b2 = sqAt(f, r+sr), sqAt(f+sf, r+2*sr)
					} else {
						b1, b2 = sqAt(f+sf, r), sqAt(f+2*sf, r+sr)
					}
					es.add(to, b1, b2)
				}
			} else if ownHalf(side, sq) {
				for _, o := range [4][2]int{{2, 2}, {-2, 2}, {2, -2}, {-2, -2}} {
					to := sqAt(f+o[0], r+o[1])
					if to < 0 || !ownHalf(side, to) {
						continue
					}
					eye := sqAt(f+o[0]/2, r+o[1]/2)
					es.add(to, eye, eye)
				}
			}

			fwd := 1
			if side == Second {
				fwd = -1
			}
			ss := &t.soldier[side][sq]
			if s := sqAt(f, r+fwd); s >= 0 {
				ss.add(s)
			}
			sideways := t.janggi || !ownHalf(side, sq)
			if sideways {
				for _, df := range [2]int{-1, 1} {
					if s := sqAt(f+df, r); s >= 0 {
						ss.add(s)
					}
				}
			}
			if t.janggi && palaceOf(sq) == int(side.Opponent()) {
				for _, df := range [2]int{-1, 1} {
					if s := sqAt(f+df, r+fwd); s >= 0 && palaceDiagStep(sq, s) {
						ss.add(s)
					}
				}
			}
		}

		if p := palaceOf(sq); p >= 0 {
			for df := -1; df <= 1; df++ {
				for dr := -1; dr <= 1; dr++ {
					s := sqAt(f+df, r+dr)
					if (df == 0 && dr == 0) || s < 0 || palaceOf(s) != p {
						continue
					}
					orth := df == 0 || dr == 0
					diag := !orth && palaceDiagStep(sq, s)
					if t.janggi {
						if orth || diag {
							t.general[sq].add(s)
							t.guard[sq].add(s)
						}
					} else {
						if orth {
							t.general[sq].add(s)
						}
						if diag {
							t.guard[sq].add(s)
						}
					}
				}
			}
		}
	}

	for sq := 0; sq < NumSquares; sq++ {
		for _, l := range t.horse[sq].l[:t.horse[sq].n] {
			t.horseAtk[l.to].add(sq, int(l.b1), int(l.b2))
		}
		for side := 0; side < 2; side++ {
			for _, l := range t.elephant[side][sq].l[:t.elephant[side][sq].n] {
				t.elephantAtk[side][l.to].add(sq, int(l.b1), int(l.b2))
			}
			for _, s := range t.soldier[side][sq].sq[:t.soldier[side][sq].n] {
				t.soldierAtk[side][s].add(sq)
			}
		}
	}

	for g := 0; g < NumSquares; g++ {
		for s := range t.lineTo[g] {
			t.lineTo[g][s] = -1
			t.horseLeg[g][s] = -1
			t.elephantPath[g][s] = [2]int8{-1, -1}
		}
		for _, l := range t.horseAtk[g].l[:t.horseAtk[g].n] {
			t.horseLeg[g][l.to] = l.b1
		}
		for side := 0; side < 2; side++ {
			for _, l := range t.elephantAtk[side][g].l[:t.elephantAtk[side][g].n] {
				t.elephantPath[g][l.to] = [2]int8{l.b1, l.b2}
			}
		}
		for d := 0; d < int(t.nLines[g]); d++ {
			ray := &t.lines[g][d]
			for _, s := range ray.sq[:ray.n] {
				t.lineTo[g][s] = int8(d)
			}
		}
	}
	return t
}
