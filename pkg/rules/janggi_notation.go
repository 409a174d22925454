package rules

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// JanggiPass is how JanggiNotation writes a pass (hansu-swim, "resting a move").
const JanggiPass = "한수쉼"

// JanggiNotation writes a legal Janggi move the way Korean game records
// (기보) do: from-square, piece name in Hangul, to-square, e.g. 02마83.
//
// A square is two digits, row then column, in the fixed board coordinates
// of the Korea Janggi Association, which both players use: rows are
// numbered from Han's back rank, 1 to 9, with Cho's back rank written 0;
// columns are numbered 1 to 9 from Cho's left (the a-file). So b1 is 02, c3
// is 83, e2 (Cho's general at the start) is 95 and e9 (Han's) is 25; the
// same squares are used by janggi.pl and Fairy-Stockfish's Janggi notation.
//
// Pieces: 궁 general, 사 guard, 상 elephant, 마 horse, 차 chariot,
// 포 cannon, 졸 Cho's soldier, 병 Han's soldier. A pass is 한수쉼.
// Examples from the start: b1c3 is 02마83, a4b4 is 71졸72, e2e2 (pass) is
// 한수쉼.
func JanggiNotation(p *Position, m Move) (string, error) {
	if err := janggiPosition(p); err != nil {
		return "", err
	}
	if err := p.CheckMove(m); err != nil {
		return "", err
	}
	return janggiNotation(p, m), nil
}

// ParseJanggiNotation reads a move written by JanggiNotation and returns it
// if it is legal in p. It also accepts spaces anywhere, hanja piece names
// (宮 將 楚 漢 士 象 馬 車 包 卒 兵 and variants), the names 장, 초 and 한 for
// the general, either soldier name for either side, the ASCII form
// <letter><from><to> with an optional - or x between the squares (H02-83,
// letters as in FEN: K A B/E N/H R C P), and "pass" for a pass. The piece
// named must be the mover's piece on the from-square.
func ParseJanggiNotation(p *Position, s string) (Move, error) {
	if err := janggiPosition(p); err != nil {
		return NoMove, err
	}
	t := strings.Join(strings.Fields(s), "")
	bad := func(why string) (Move, error) {
		return NoMove, fmt.Errorf("%w: janggi notation %q: %s (want e.g. 02마83, H02-83 or %s)", ErrBadMove, s, why, JanggiPass)
	}
	if t == JanggiPass || strings.EqualFold(t, "pass") {
		g := p.GeneralSquare(p.Turn())
		m := NewMove(g, g)
		if err := p.CheckMove(m); err != nil {
			return NoMove, fmt.Errorf("janggi notation %q: %w", s, err)
		}
		return m, nil
	}
	var kind Kind
	var from, to Square
	var ok bool
	if t != "" && t[0] >= '0' && t[0] <= '9' {
		if from, ok = janggiSquare(t); !ok {
			return bad("the from-square must be two digits, row 0-9 then column 1-9")
		}
		rest := t[2:]
		name, size := pieceToken(rest)
		if kind = janggiKind(name); kind == NoKind {
			return bad("a piece name (궁 사 상 마 차 포 졸 병, hanja or a letter) must follow the from-square")
		}
		rest = rest[size:]
		if to, ok = janggiSquare(rest); !ok || len(rest) != 2 {
			return bad("the to-square must be two digits, row 0-9 then column 1-9, at the end")
		}
	} else {
		name, size := pieceToken(t)
		if kind = janggiKind(name); kind == NoKind {
			return bad("it must start with a square or a piece letter")
		}
		rest := t[size:]
		if from, ok = janggiSquare(rest); !ok {
			return bad("the from-square must be two digits, row 0-9 then column 1-9")
		}
		rest = rest[2:]
		if rest != "" && (rest[0] == '-' || rest[0] == 'x' || rest[0] == 'X') {
			rest = rest[1:]
		}
		if to, ok = janggiSquare(rest); !ok || len(rest) != 2 {
			return bad("the to-square must be two digits, row 0-9 then column 1-9, at the end")
		}
	}
	pc := p.PieceAt(from)
	us := p.Turn()
	switch {
	case pc == NoPiece:
		return NoMove, fmt.Errorf("%w: janggi notation %q: there is no piece on %s (%v)", ErrIllegalMove, s, janggiSquareName(from), from)
	case pc.Side() != us:
		return NoMove, fmt.Errorf("%w: janggi notation %q: the %v on %s (%v) is %s's, and it is %s's turn", ErrIllegalMove, s, pc.Kind(), janggiSquareName(from), from, SideName(Janggi, pc.Side()), SideName(Janggi, us))
	case pc.Kind() != kind:
		return NoMove, fmt.Errorf("%w: janggi notation %q: the piece on %s (%v) is %s, not %s", ErrIllegalMove, s, janggiSquareName(from), from, withArticle(pc.Kind().String()), withArticle(kind.String()))
	}
	m := NewMove(from, to)
	if err := p.CheckMove(m); err != nil {
		return NoMove, fmt.Errorf("janggi notation %q: %w", s, err)
	}
	return m, nil
}

func janggiPosition(p *Position) error {
	if p == nil {
		return fmt.Errorf("%w: no position", ErrBadMove)
	}
	if p.Variant() != Janggi {
		return fmt.Errorf("%w: janggi notation is for janggi, not %v", ErrBadMove, p.Variant())
	}
	return nil
}

var janggiNames = [8]string{General: "궁", Guard: "사", Elephant: "상", Horse: "마", Chariot: "차", Cannon: "포", Soldier: "졸"}

// janggiNotation is JanggiNotation for a move already known to be legal.
func janggiNotation(p *Position, m Move) string {
	if m.IsPass() {
		return JanggiPass
	}
	pc := p.PieceAt(m.From())
	name := janggiNames[pc.Kind()]
	if pc == MakePiece(Second, Soldier) {
		name = "병"
	}
	return janggiSquareName(m.From()) + name + janggiSquareName(m.To())
}

// janggiSquareName writes sq as row digit (1 = rank 10 ... 9 = rank 2,
// 0 = rank 1) and column digit (1 = a-file).
func janggiSquareName(sq Square) string {
	return string([]byte{byte('0' + (NumRanks-sq.Rank())%NumRanks), byte('1' + sq.File())})
}

// janggiSquare reads the two digits at the start of s.
func janggiSquare(s string) (Square, bool) {
	if len(s) < 2 || s[0] < '0' || s[0] > '9' || s[1] < '1' || s[1] > '9' {
		return NoSquare, false
	}
	rank := (NumRanks - int(s[0]-'0')) % NumRanks
	return SquareAt(int(s[1]-'1'), rank), true
}

// pieceToken returns the piece name at the start of s: one ASCII letter or
// one Hangul or hanja character, and its length in bytes.
func pieceToken(s string) (string, int) {
	if s == "" {
		return "", 0
	}
	if s[0] < utf8.RuneSelf {
		return s[:1], 1
	}
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError {
		return "", 0
	}
	return s[:size], size
}

func janggiKind(name string) Kind {
	switch name {
	case "궁", "장", "초", "한", "宮", "將", "帥", "楚", "漢", "K", "k":
		return General
	case "사", "士", "仕", "A", "a":
		return Guard
	case "상", "象", "相", "B", "b", "E", "e":
		return Elephant
	case "마", "馬", "傌", "N", "n", "H", "h":
		return Horse
	case "차", "車", "俥", "R", "r":
		return Chariot
	case "포", "包", "砲", "炮", "C", "c":
		return Cannon
	case "졸", "병", "卒", "兵", "P", "p":
		return Soldier
	}
	return NoKind
}

// withArticle puts "a" or "an" before a piece's name.
func withArticle(name string) string {
	if strings.ContainsRune("aeiou", rune(name[0])) {
		return "an " + name
	}
	return "a " + name
}
