package rules

import (
	"fmt"
	"slices"
)

// This file explains illegal moves to people. Legality itself is always
// decided by LegalMoves; the geometry here only chooses the words, so a gap
// in it can make a message vague but never accept or refuse a move wrongly.

// checkLegal returns nil if m is legal in p, else a *MoveError saying why.
func checkLegal(p *Position, m Move) error {
	var buf [128]Move
	if slices.Contains(p.LegalMoves(buf[:0]), m) {
		return nil
	}
	return &MoveError{Move: m, Reason: explainIllegalMove(p, m)}
}

// sideName is how players of v call side s.
func sideName(v Variant, s Side) string {
	switch {
	case v == Janggi && s == First:
		return "Cho"
	case v == Janggi:
		return "Han"
	case s == First:
		return "Red"
	}
	return "Black"
}

// explainIllegalMove says why m, which LegalMoves does not list, is illegal in p.
func explainIllegalMove(p *Position, m Move) string {
	from, to := m.From(), m.To()
	if !from.Valid() || !to.Valid() {
		return "not a move on the board"
	}
	v := p.Variant()
	us, them := p.Turn(), p.Turn().Opponent()
	if from == to {
		g := p.GeneralSquare(us)
		switch {
		case v == Xiangqi:
			return "xiangqi has no pass"
		case from != g:
			return fmt.Sprintf("a pass is written as the mover's general square twice (%v%v)", g, g)
		case p.InCheck():
			return "a player in check may not pass"
		}
		return "the pass is not legal here"
	}
	pc := p.PieceAt(from)
	if pc == NoPiece {
		return fmt.Sprintf("there is no piece on %v", from)
	}
	name := kindName(v, pc.Kind())
	if pc.Side() != us {
		return fmt.Sprintf("the %s on %v is %s's, and it is %s's turn", name, from, sideName(v, them), sideName(v, us))
	}
	if q := p.PieceAt(to); q != NoPiece && q.Side() == us {
		return fmt.Sprintf("%v is occupied by %s's own %s", to, sideName(v, us), kindName(v, q.Kind()))
	}
	if r := shapeReason(p, pc, from, to); r != "" {
		return r
	}
	q := p.Clone()
	q.Make(m)
	g := q.GeneralSquare(us)
	if v == Xiangqi && q.GeneralsFacing() {
		return fmt.Sprintf("the generals would face each other on the %c-file", 'a'+byte(g.File()))
	}
	if q.IsAttacked(g, them) {
		switch {
		case pc.Kind() == General:
			return fmt.Sprintf("the general would be attacked on %v", to)
		case p.InCheck():
			return "the general is in check and this move does not answer it"
		}
		return "it would expose the general to attack"
	}
	return "it is not a legal move here"
}

// inOwnPalace reports whether sq is in side s's palace (d1-f3 or d8-f10).
func inOwnPalace(s Side, sq Square) bool {
	f, r := sq.File(), sq.Rank()
	if f < 3 || f > 5 {
		return false
	}
	if s == First {
		return r <= 2
	}
	return r >= 7
}

// palaceLines are the palace diagonals, the lines that chariots, cannons,
// generals, guards and (in the enemy palace) soldiers may follow diagonally.
var palaceLines = [4][3]Square{
	{3, 13, 23},  // d1 e2 f3
	{5, 13, 21},  // f1 e2 d3
	{66, 76, 86}, // d8 e9 f10
	{68, 76, 84}, // f8 e9 d10
}

// palaceLine finds the palace diagonal through both a and b (a != b) and
// says whether they are its two ends, with its centre between them.
func palaceLine(a, b Square) (line *[3]Square, ends, ok bool) {
	for i := range palaceLines {
		l := &palaceLines[i]
		ia, ib := slices.Index(l[:], a), slices.Index(l[:], b)
		if ia >= 0 && ib >= 0 && ia != ib {
			return l, absInt(ia-ib) == 2, true
		}
	}
	return nil, false, false
}

// palaceStep reports whether a and b are neighbours on a palace diagonal.
func palaceStep(a, b Square) bool {
	_, ends, ok := palaceLine(a, b)
	return ok && !ends
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func signInt(x int) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

// kindName is the name a player of v expects in a message (Xiangqi calls
// the guard an advisor).
func kindName(v Variant, k Kind) string {
	if k == Guard && v == Xiangqi {
		return "advisor"
	}
	return k.String()
}

// between lists the squares strictly between from and to on a line a
// chariot can use: a file, a rank or, in Janggi, a palace diagonal.
func between(v Variant, from, to Square) ([]Square, bool) {
	ff, fr, tf, tr := from.File(), from.Rank(), to.File(), to.Rank()
	if ff != tf && fr != tr {
		if v != Janggi {
			return nil, false
		}
		line, ends, ok := palaceLine(from, to)
		if !ok {
			return nil, false
		}
		if ends {
			return []Square{line[1]}, true
		}
		return nil, true
	}
	df, dr := signInt(tf-ff), signInt(tr-fr)
	var sqs []Square
	for f, r := ff+df, fr+dr; f != tf || r != tr; f, r = f+df, r+dr {
		sqs = append(sqs, SquareAt(f, r))
	}
	return sqs, true
}

// crossedRiver reports whether sq is on the far side of the Xiangqi river for s.
func crossedRiver(s Side, sq Square) bool {
	if s == First {
		return sq.Rank() >= 5
	}
	return sq.Rank() <= 4
}

// shapeReason returns why pc cannot go from to to by its movement rule
// alone (ignoring the safety of its own general), or "" if it can.
func shapeReason(p *Position, pc Piece, from, to Square) string {
	v := p.Variant()
	us := pc.Side()
	k := pc.Kind()
	name := kindName(v, k)
	df, dr := to.File()-from.File(), to.Rank()-from.Rank()
	adf, adr := absInt(df), absInt(dr)
	fwd := 1
	if us == Second {
		fwd = -1
	}
	switch k {
	case General, Guard:
		if !inOwnPalace(us, to) {
			return fmt.Sprintf("the %s may not leave its palace", name)
		}
		orth := adf+adr == 1
		diag := adf == 1 && adr == 1 && palaceStep(from, to)
		switch {
		case v == Janggi && !orth && !diag:
			return fmt.Sprintf("the %s moves one point along a palace line", name)
		case v == Xiangqi && k == General && !orth:
			return "the general moves one point orthogonally"
		case v == Xiangqi && k == Guard && !diag:
			return "the advisor moves one point diagonally along a palace line"
		}
	case Chariot, Cannon:
		path, ok := between(v, from, to)
		if !ok {
			if v == Janggi {
				return fmt.Sprintf("the %s moves along a file, a rank or a palace diagonal", name)
			}
			return fmt.Sprintf("the %s moves along a file or a rank", name)
		}
		var screens []Square
		for _, s := range path {
			if p.PieceAt(s) != NoPiece {
				screens = append(screens, s)
			}
		}
		if k == Chariot {
			if len(screens) > 0 {
				return fmt.Sprintf("the chariot's path is blocked at %v", screens[0])
			}
			return ""
		}
		target := p.PieceAt(to)
		if v == Xiangqi {
			switch {
			case target == NoPiece && len(screens) > 0:
				return fmt.Sprintf("the cannon's path is blocked at %v (it jumps only to capture)", screens[0])
			case target != NoPiece && len(screens) == 0:
				return "the cannon captures only by jumping exactly one piece, and none stands between"
			case target != NoPiece && len(screens) > 1:
				return fmt.Sprintf("the cannon can jump only one piece, and %d stand between (%v and %v)", len(screens), screens[0], screens[1])
			}
			return ""
		}
		switch {
		case len(screens) == 0:
			return "the cannon must jump exactly one piece, and none stands between"
		case len(screens) > 1:
			return fmt.Sprintf("the cannon can jump only one piece, and %d stand between (%v and %v)", len(screens), screens[0], screens[1])
		case p.PieceAt(screens[0]).Kind() == Cannon:
			return fmt.Sprintf("a cannon may not jump over a cannon (on %v)", screens[0])
		case target.Kind() == Cannon:
			return "a cannon may not capture a cannon"
		}
	case Horse:
		if !(adf == 1 && adr == 2 || adf == 2 && adr == 1) {
			return "the horse moves one point orthogonally, then one diagonally outward"
		}
		leg := SquareAt(from.File(), from.Rank()+signInt(dr))
		if adf == 2 {
			leg = SquareAt(from.File()+signInt(df), from.Rank())
		}
		if p.PieceAt(leg) != NoPiece {
			return fmt.Sprintf("the horse is blocked at %v", leg)
		}
	case Elephant:
		sf, sr := signInt(df), signInt(dr)
		var blocks []Square
		if v == Janggi {
			switch {
			case adf == 2 && adr == 3:
				blocks = []Square{SquareAt(from.File(), from.Rank()+sr), SquareAt(from.File()+sf, from.Rank()+2*sr)}
			case adf == 3 && adr == 2:
				blocks = []Square{SquareAt(from.File()+sf, from.Rank()), SquareAt(from.File()+2*sf, from.Rank()+sr)}
			default:
				return "the elephant moves one point orthogonally, then two diagonally outward"
			}
		} else {
			if adf != 2 || adr != 2 {
				return "the elephant moves exactly two points diagonally"
			}
			if crossedRiver(us, to) {
				return "the elephant may not cross the river"
			}
			blocks = []Square{SquareAt(from.File()+sf, from.Rank()+sr)}
		}
		for _, b := range blocks {
			if p.PieceAt(b) != NoPiece {
				return fmt.Sprintf("the elephant is blocked at %v", b)
			}
		}
	case Soldier:
		forward := df == 0 && dr == fwd
		sideways := dr == 0 && adf == 1
		switch {
		case dr*fwd < 0:
			return "the soldier never moves backward"
		case v == Xiangqi && sideways && !crossedRiver(us, from):
			return "the soldier moves sideways only after crossing the river"
		case v == Janggi && adf == 1 && dr == fwd:
			if !inOwnPalace(us.Opponent(), from) || !palaceStep(from, to) {
				return "the soldier moves diagonally only along a diagonal of the enemy palace"
			}
		case !forward && !sideways:
			return "the soldier moves one point forward or sideways"
		}
	}
	return ""
}
