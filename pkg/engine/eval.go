package engine

import "github.com/palacehq/palace/pkg/rules"

// Material in centipawns. Janggi values are the game's own points times 100
// (chariot 13, cannon 7, horse 5, elephant 3, guard 3, soldier 2), with the
// elephant a little below the guard, as players rate it; Xiangqi values are
// the usual ones, soldiers gaining their river bonus from the tables.
var material = [3][8]int{
	rules.Janggi:  {rules.Guard: 300, rules.Elephant: 280, rules.Horse: 500, rules.Chariot: 1300, rules.Cannon: 700, rules.Soldier: 200},
	rules.Xiangqi: {rules.Guard: 200, rules.Elephant: 200, rules.Horse: 420, rules.Chariot: 900, rules.Cannon: 450, rules.Soldier: 100},
}

// orderValue ranks victims and attackers for MVV/LVA; the general ranks
// highest as an attacker so that it is tried last.
var orderValue = [8]int{rules.General: 20, rules.Guard: 2, rules.Elephant: 2, rules.Horse: 4, rules.Chariot: 9, rules.Cannon: 5, rules.Soldier: 1}

// Attack weights of pieces standing near the enemy palace (see zone).
var attackWeight = [8]int{rules.Horse: 2, rules.Chariot: 3, rules.Cannon: 2, rules.Soldier: 1}

const (
	tempo          = 10
	chariotMobCP   = 3 // per reachable point
	horseMobCP     = 6
	elephantMobCP  = 2
	cannonMobCP    = 2
	emptyCannonCP  = 70 // enemy cannon on the general's open file
	missingGuardCP = 18
)

type horseStep struct{ to, leg int8 }

// geometry is board shape the evaluation needs; the move generator has its
// own in pkg/rules, unexported.
type geometry struct {
	rays [90][4][]int8 // orthogonal rays, nearest point first
	// ray and nRay hold the same rays in fixed arrays: the evaluation's
	// inner loop then has no slice headers to load.
	ray   [90][4][9]int8
	nRay  [90][4]uint8
	horse [90][]horseStep
	// elephant[v][sq]: Janggi (2,3) leaps or Xiangqi (2,2) leaps with their
	// blocking points, for mobility only (the river is ignored: an elephant
	// that could cross would be counted a point too many, never wrongly
	// legal).
	elephant [3][90][][3]int8
	// zone[s][sq]: sq lies in or just in front of the palace of side s.
	zone [2][90]bool
}

var geo = func() *geometry {
	g := &geometry{}
	on := func(f, r int) bool { return f >= 0 && f < 9 && r >= 0 && r < 10 }
	dirs := [4][2]int{{0, 1}, {0, -1}, {-1, 0}, {1, 0}}
	for sq := 0; sq < 90; sq++ {
		f, r := sq%9, sq/9
		for d, dv := range dirs {
			for ff, rr := f+dv[0], r+dv[1]; on(ff, rr); ff, rr = ff+dv[0], rr+dv[1] {
				g.ray[sq][d][g.nRay[sq][d]] = int8(rr*9 + ff)
				g.nRay[sq][d]++
				g.rays[sq][d] = append(g.rays[sq][d], int8(rr*9+ff))
			}
		}
		for _, dv := range dirs {
			lf, lr := f+dv[0], r+dv[1]
			if !on(lf, lr) {
				continue
			}
			for _, side := range [2]int{-1, 1} {
				// one orthogonal step, then diagonally outward
				df, dr := dv[0], dv[1]
				tf, tr := lf+df+side*dr, lr+dr+side*df
				if on(tf, tr) {
					g.horse[sq] = append(g.horse[sq], horseStep{int8(tr*9 + tf), int8(lr*9 + lf)})
				}
				// Janggi elephant: orthogonal, then two diagonal points
				mf, mr := tf, tr
				ef, er := mf+df+side*dr, mr+dr+side*df
				if on(ef, er) {
					g.elephant[rules.Janggi][sq] = append(g.elephant[rules.Janggi][sq], [3]int8{int8(er*9 + ef), int8(lr*9 + lf), int8(mr*9 + mf)})
				}
			}
		}
		for _, dv := range [4][2]int{{1, 1}, {1, -1}, {-1, 1}, {-1, -1}} {
			ef, er := f+2*dv[0], r+2*dv[1]
			if on(ef, er) {
				eye := int8((r+dv[1])*9 + f + dv[0])
				g.elephant[rules.Xiangqi][sq] = append(g.elephant[rules.Xiangqi][sq], [3]int8{int8(er*9 + ef), eye, eye})
			}
		}
		if f >= 2 && f <= 6 {
			g.zone[rules.First][sq] = r <= 3
			g.zone[rules.Second][sq] = r >= 6
		}
	}
	return g
}()

// psqValue is a piece's material plus its table bonus on sq.
func psqValue(v rules.Variant, pc rules.Piece, sq int) int {
	k := pc.Kind()
	return material[v][k] + int(pst[v][k][relSquare(pc.Side(), sq)])
}

// evaluate scores the position for the side to move, in centipawns. The
// material and table part (s.psq) is kept up to date by make and unmake;
// the rest is computed here from the mirror board.
func (s *searcher) evaluate() int {
	p := s.pos
	v := s.variant
	janggi := v == rules.Janggi
	board := &s.board
	score := [2]int{int(s.psq[0]), int(s.psq[1])}
	var attack [2]int
	pieces := 0
	for side := rules.First; side <= rules.Second; side++ {
		for k := rules.Guard; k <= rules.Soldier; k++ {
			pieces += int(s.counts[side][k])
		}
	}
	// Cannons need screens: worth more in a crowded board, less in an
	// empty one; horses the other way round (Xiangqi lore, and more so in
	// Janggi, where cannons cannot use or take each other).
	cannonAdj, horseAdj := (pieces-20)*3, -(pieces-20)*2
	if janggi {
		cannonAdj = (pieces - 22) * 6
	}
	for side := rules.First; side <= rules.Second; side++ {
		score[side] += cannonAdj*int(s.counts[side][rules.Cannon]) + horseAdj*int(s.counts[side][rules.Horse])
	}
	for side := rules.First; side <= rules.Second; side++ {
		for _, sq8 := range s.plist[side][:s.pcount[side]] {
			sq := int(sq8)
			s.evalPiece(board, side, board[sq].Kind(), sq, &score, &attack)
		}
	}

	// General safety: attackers near the palace hurt more the fewer
	// defenders (guards, and in Xiangqi elephants) are left.
	for def := rules.First; def <= rules.Second; def++ {
		att := def ^ 1
		a := attack[att]
		if a == 0 {
			continue
		}
		defenders := int(s.counts[def][rules.Guard])
		if !janggi && s.counts[def][rules.Elephant] > 0 {
			defenders++
		}
		pen := a * a * 3 * (5 - defenders) / 4
		if pen > 400 {
			pen = 400
		}
		score[def] -= pen
		// A missing guard matters only while the enemy can attack.
		majors := int(s.counts[att][rules.Chariot])*2 + int(s.counts[att][rules.Horse]+s.counts[att][rules.Cannon])
		score[def] -= (2 - int(s.counts[def][rules.Guard])) * missingGuardCP * majors / 4
	}
	if !janggi {
		// An enemy cannon on the general's file with nothing between pins
		// the whole centre ("empty-head cannon").
		for def := rules.First; def <= rules.Second; def++ {
			g := int(p.GeneralSquare(def))
			if g < 0 {
				continue
			}
			d := 0 // up, toward the enemy, for the first player
			if def == rules.Second {
				d = 1
			}
			for _, t := range geo.rays[g][d] {
				q := board[t]
				if q == rules.NoPiece {
					continue
				}
				if q.Side() != def && q.Kind() == rules.Cannon {
					score[def] -= emptyCannonCP
				}
				break
			}
		}
	}

	us := p.Turn()
	e := score[us] - score[us^1] + tempo
	if janggi {
		// Han's 1.5 points decide an unfinished game: worth little early,
		// its full value as the 200-ply limit comes near.
		n := len(s.st) - 1
		if n > 200 {
			n = 200
		}
		komi := 150 * n / 200
		if us == rules.Second {
			e += komi
		} else {
			e -= komi
		}
	}
	return e
}

// evalPiece adds the mobility of the piece k of side on sq to score and its
// weight to attack when it stands near the enemy palace.
func (s *searcher) evalPiece(board *[90]rules.Piece, side rules.Side, k rules.Kind, sq int, score, attack *[2]int) {
	sc := 0
	switch k {
	case rules.Chariot:
		n := 0
		for d := 0; d < 4; d++ {
			ray := &geo.ray[sq][d]
			for j := 0; j < int(geo.nRay[sq][d]); j++ {
				q := board[ray[j]]
				if q == rules.NoPiece {
					n++
					continue
				}
				if q.Side() != side {
					n++
				}
				break
			}
		}
		sc = n * chariotMobCP
	case rules.Horse:
		n := 0
		for _, h := range geo.horse[sq] {
			if board[h.leg] != rules.NoPiece {
				continue
			}
			if q := board[h.to]; q == rules.NoPiece || q.Side() != side {
				n++
			}
		}
		sc = n * horseMobCP
	case rules.Cannon:
		// A cannon's worth is its screens: count the points it could
		// reach by jumping (Janggi: never over or onto a cannon), and in
		// Xiangqi its plain moves too.
		janggi := s.variant == rules.Janggi
		n := 0
		for d := 0; d < 4; d++ {
			ray := &geo.ray[sq][d]
			j, end := 0, int(geo.nRay[sq][d])
			for ; j < end && board[ray[j]] == rules.NoPiece; j++ {
				if !janggi {
					n++
				}
			}
			if j == end || (janggi && board[ray[j]].Kind() == rules.Cannon) {
				continue
			}
			for j++; j < end; j++ {
				q := board[ray[j]]
				if q == rules.NoPiece {
					if janggi {
						n++
					}
					continue
				}
				if q.Side() != side && (!janggi || q.Kind() != rules.Cannon) {
					n += 2 // a capture is worth more than a move
				}
				break
			}
		}
		sc = n * cannonMobCP
	case rules.Elephant:
		n := 0
		for _, e := range geo.elephant[s.variant][sq] {
			if board[e[1]] != rules.NoPiece || board[e[2]] != rules.NoPiece {
				continue
			}
			if q := board[e[0]]; q == rules.NoPiece || q.Side() != side {
				n++
			}
		}
		sc = n * elephantMobCP
	}
	if attackWeight[k] != 0 && geo.zone[side^1][sq] {
		attack[side] += attackWeight[k]
	}
	score[side] += sc
}
