package rules

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// WXF writes a legal Xiangqi move in WXF notation: four characters, piece
// letter (R chariot, H horse, E elephant, A advisor, K general, C cannon,
// P soldier), the file it stands on counted from the mover's own right
// (Red: i-file = 1; Black: a-file = 1), a direction (+ forward, toward the
// opponent; - backward; . along the rank) and then the destination file or,
// for a move along the file, the number of points moved. h3e3 from the
// start position is C2.5 and h1g3 is H2+3.
//
// Two pieces of a kind on one file are told apart by + (front) and - (rear)
// in place of the file: R+.4, P-+1; but advisors and elephants keep their
// file (A4+5), the direction saying which moves. Soldiers can need more:
// when three or more soldiers of a side share a file, or two files each
// hold two or more, + and - cannot say which is meant, so the soldier's
// place on its file counted from the front (1 = front) replaces the letter
// and the file number follows: 25.4 is the second soldier from the front
// on file 5 moving to file 4. That is the form Fairy-Stockfish writes for three or more soldiers
// on a file; Palace uses it for two pairs too, where Fairy-Stockfish's P+
// would be ambiguous. ParseWXF reads all of these back.
func WXF(p *Position, m Move) (string, error) {
	if err := wxfPosition(p); err != nil {
		return "", err
	}
	if err := p.CheckMove(m); err != nil {
		return "", err
	}
	return wxf(p, m), nil
}

// ParseWXF reads a WXF move (see WXF) and returns it if it is legal in p.
// Besides what WXF writes it accepts lower-case letters, N for the horse,
// B for the elephant, = for ., the tandem sign before the letter (+C.5),
// and a plain file number for one of two tandem pieces when only one of
// them can make the move (A4+5 with two advisors on file 4).
func ParseWXF(p *Position, s string) (Move, error) {
	if err := wxfPosition(p); err != nil {
		return NoMove, err
	}
	sp, err := parseWXFSpec(s)
	if err != nil {
		return NoMove, err
	}
	var buf [128]Move
	var found []Move
	for _, m := range p.LegalMoves(buf[:0]) {
		if f := wxfFactsOf(p, m); sp.selects(f.wxfPlace) && sp.dir == f.dir && sp.dest == f.dest {
			found = append(found, m)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return NoMove, fmt.Errorf("%w: WXF %q: %s", ErrIllegalMove, s, sp.whyNoMove(p))
	}
	fits := make([]string, len(found))
	for i, m := range found {
		fits[i] = fmt.Sprintf("%s (%v)", wxf(p, m), m)
	}
	return NoMove, fmt.Errorf("%w: WXF %q is ambiguous: it fits %s", ErrBadMove, s, strings.Join(fits, " and "))
}

func wxfPosition(p *Position) error {
	if p == nil {
		return fmt.Errorf("%w: no position", ErrBadMove)
	}
	if p.Variant() != Xiangqi {
		return fmt.Errorf("%w: WXF notation is for xiangqi, not %v", ErrBadMove, p.Variant())
	}
	return nil
}

var wxfLetters = [8]byte{General: 'K', Guard: 'A', Elephant: 'E', Horse: 'H', Chariot: 'R', Cannon: 'C', Soldier: 'P'}

func wxfKind(c byte) Kind {
	switch c {
	case 'R', 'r':
		return Chariot
	case 'H', 'h', 'N', 'n':
		return Horse
	case 'E', 'e', 'B', 'b':
		return Elephant
	case 'A', 'a':
		return Guard
	case 'K', 'k':
		return General
	case 'C', 'c':
		return Cannon
	case 'P', 'p':
		return Soldier
	}
	return NoKind
}

// wxfFile is file f (0 = a) counted from side s's own right, 1-9.
func wxfFile(s Side, f int) int {
	if s == First {
		return NumFiles - f
	}
	return f + 1
}

// wxfPlace says where a piece stands in WXF terms.
type wxfPlace struct {
	kind  Kind
	file  int // 1-9, from the owner's right
	index int // place among same pieces on the file, 1 = front
	count int // same pieces (side and kind) on the file
	// tandemElsewhere: another file also holds two or more soldiers of the
	// same side, so + and - alone would not say which file is meant.
	tandemElsewhere bool
}

func wxfPlaceOf(p *Position, from Square) wxfPlace {
	pc := p.PieceAt(from)
	s := pc.Side()
	w := wxfPlace{kind: pc.Kind(), file: wxfFile(s, from.File())}
	w.count, w.index = countOnFile(p, pc, from.File(), from)
	if w.kind == Soldier && w.count >= 2 {
		for f := 0; f < NumFiles; f++ {
			if n, _ := countOnFile(p, pc, f, NoSquare); f != from.File() && n >= 2 {
				w.tandemElsewhere = true
			}
		}
	}
	return w
}

// countOnFile counts pc on file f and gives the place of sq among them,
// counted from the front (the end nearest the opponent), or 0.
func countOnFile(p *Position, pc Piece, f int, sq Square) (count, index int) {
	for i := 0; i < NumRanks; i++ {
		r := NumRanks - 1 - i
		if pc.Side() == Second {
			r = i
		}
		if s := SquareAt(f, r); p.PieceAt(s) == pc {
			count++
			if s == sq {
				index = count
			}
		}
	}
	return count, index
}

// wxfFacts is everything WXF notation says about a move.
type wxfFacts struct {
	wxfPlace
	dir  byte // '+', '-' or '.'
	dest int  // destination file, or points moved along the file
}

func wxfFactsOf(p *Position, m Move) wxfFacts {
	from, to := m.From(), m.To()
	s := p.PieceAt(from).Side()
	f := wxfFacts{wxfPlace: wxfPlaceOf(p, from), dir: '.'}
	progress := to.Rank() - from.Rank()
	if s == Second {
		progress = -progress
	}
	switch {
	case progress > 0:
		f.dir = '+'
	case progress < 0:
		f.dir = '-'
	}
	if from.File() == to.File() {
		f.dest = max(progress, -progress)
	} else {
		f.dest = wxfFile(s, to.File())
	}
	return f
}

// wxf is WXF for a move already known to be legal.
func wxf(p *Position, m Move) string {
	f := wxfFactsOf(p, m)
	b := [4]byte{wxfLetters[f.kind], byte('0' + f.file), f.dir, byte('0' + f.dest)}
	switch {
	case f.count < 2:
	case (f.kind == Guard || f.kind == Elephant) && byFileAlone(p, m, f):
		// Of two advisors or elephants on a file, only the rear one can
		// advance and only the front one retreat: records give the file.
		// Not so off their points, which a position set up by hand may
		// hold: the sign then says which.
	case f.kind != Soldier || f.count == 2 && !f.tandemElsewhere:
		b[1] = "+-"[f.index-1]
	default:
		b[0] = byte('0' + f.index)
	}
	return string(b[:])
}

// byFileAlone reports whether m, of facts f, is the only legal move in p
// of a piece of its kind on its file with its direction and destination.
func byFileAlone(p *Position, m Move, f wxfFacts) bool {
	var buf [128]Move
	for _, o := range p.LegalMoves(buf[:0]) {
		if o == m || p.PieceAt(o.From()) != p.PieceAt(m.From()) || o.From().File() != m.From().File() {
			continue
		}
		if g := wxfFactsOf(p, o); g.dir == f.dir && g.dest == f.dest {
			return false
		}
	}
	return true
}

// wxfSpec is a parsed WXF move, before it is matched against the position.
type wxfSpec struct {
	kind  Kind
	sel   byte // 'f' by file, '+' front, '-' rear, 'i' by place and file
	file  int
	index int
	dir   byte
	dest  int
}

func parseWXFSpec(s string) (wxfSpec, error) {
	bad := func(why string) (wxfSpec, error) {
		return wxfSpec{}, fmt.Errorf("%w: WXF %q: %s (want e.g. C2.5, H2+3, R+.4 or 25.4)", ErrBadMove, s, why)
	}
	t := strings.TrimSpace(s)
	if strings.IndexFunc(t, func(r rune) bool { return r >= utf8.RuneSelf }) >= 0 {
		// Chinese notation and full-width letters are four characters
		// too; their writer needs to hear what WXF is written in.
		return bad("WXF is written in ASCII letters, digits and signs; Chinese notation and full-width characters are not read")
	}
	if len(t) != 4 {
		return bad("not four characters")
	}
	digit := func(c byte) int {
		if c >= '1' && c <= '9' {
			return int(c - '0')
		}
		return 0
	}
	var sp wxfSpec
	switch c0, c1 := t[0], t[1]; {
	case c0 == '+' || c0 == '-':
		if sp.kind = wxfKind(c1); sp.kind == NoKind {
			return bad(fmt.Sprintf("a piece letter must follow %c", c0))
		}
		sp.sel = c0
	case digit(c0) > 0:
		if digit(c0) > 5 {
			return bad("a soldier's place on its file is 1-5")
		}
		if digit(c1) == 0 {
			return bad("a soldier's place on its file must be followed by the file, 1-9")
		}
		sp.kind, sp.sel, sp.index, sp.file = Soldier, 'i', digit(c0), digit(c1)
	default:
		if sp.kind = wxfKind(c0); sp.kind == NoKind {
			return bad(fmt.Sprintf("%q is not a piece letter (R H E A K C P)", c0))
		}
		switch {
		case c1 == '+' || c1 == '-':
			sp.sel = c1
		case digit(c1) > 0:
			sp.sel, sp.file = 'f', digit(c1)
		default:
			return bad("the second character must be a file 1-9, + (front) or - (rear)")
		}
	}
	switch t[2] {
	case '+', '-', '.':
		sp.dir = t[2]
	case '=':
		sp.dir = '.'
	default:
		return bad("the third character must be + (forward), - (backward) or . (along the rank)")
	}
	if sp.dest = digit(t[3]); sp.dest == 0 {
		return bad("the last character must be a file or a distance, 1-9")
	}
	return sp, nil
}

// selects reports whether the piece at w is the one sp names.
func (sp wxfSpec) selects(w wxfPlace) bool {
	if sp.kind != w.kind {
		return false
	}
	switch sp.sel {
	case 'f':
		return w.file == sp.file
	case '+':
		return w.count >= 2 && w.index == 1
	case '-':
		return w.count >= 2 && w.index == w.count
	}
	return w.file == sp.file && w.index == sp.index
}

// whyNoMove explains a WXF move that fits no legal move of p.
func (sp wxfSpec) whyNoMove(p *Position) string {
	us := p.Turn()
	name := SideName(Xiangqi, us) + " " + kindName(Xiangqi, sp.kind)
	pc := MakePiece(us, sp.kind)
	var fits []string
	for sq := Square(0); sq < NumSquares; sq++ {
		if p.PieceAt(sq) == pc && sp.selects(wxfPlaceOf(p, sq)) {
			fits = append(fits, sq.String())
		}
	}
	if len(fits) > 0 {
		return fmt.Sprintf("the %s on %s has no such legal move", name, strings.Join(fits, " and "))
	}
	switch sp.sel {
	case 'f':
		return fmt.Sprintf("there is no %s on file %d", name, sp.file)
	case 'i':
		return fmt.Sprintf("there is no soldier %d from the front on file %d", sp.index, sp.file)
	}
	return fmt.Sprintf("%s has no two %ss on one file, so none is the front or rear one", SideName(Xiangqi, us), kindName(Xiangqi, sp.kind))
}
