package rules

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/palacehq/palace/pkg/textcut"
)

// Move is from | to<<7 | a validity bit, so the zero value is NoMove and
// cannot be mistaken for the (never legal) move a1a1.
type Move uint16

const (
	NoMove    Move = 0
	moveValid Move = 1 << 14
)

// NewMove returns NoMove if either square is off the board. from == to is a
// Janggi pass when from is the mover's general.
func NewMove(from, to Square) Move {
	if !from.Valid() || !to.Valid() {
		return NoMove
	}
	return mkMove(int(from), int(to))
}

func mkMove(from, to int) Move { return Move(from) | Move(to)<<7 | moveValid }

func (m Move) valid() bool {
	return m&moveValid != 0 && m&127 < NumSquares && m>>7&127 < NumSquares && m>>15 == 0
}

// From returns NoSquare for NoMove or a malformed value.
func (m Move) From() Square {
	if !m.valid() {
		return NoSquare
	}
	return Square(m & 127)
}

// To returns NoSquare for NoMove or a malformed value.
func (m Move) To() Square {
	if !m.valid() {
		return NoSquare
	}
	return Square(m >> 7 & 127)
}

// IsPass reports a Janggi pass (the general's square twice).
func (m Move) IsPass() bool { return m.valid() && m&127 == m>>7&127 }

// String gives coordinate notation ("h3e3"); NoMove is "0000" as in UCI.
func (m Move) String() string {
	if !m.valid() {
		return "0000"
	}
	return squareNames[m&127] + squareNames[m>>7&127]
}

// AppendText appends the move's coordinate notation to b (see String),
// so a list of moves can be written into one buffer.
func (m Move) AppendText(b []byte) ([]byte, error) {
	if !m.valid() {
		return append(b, "0000"...), nil
	}
	return append(append(b, squareNames[m&127]...), squareNames[m>>7&127]...), nil
}

// ParseMove reads coordinate notation ("h3e3", "b10c8", pass "e2e2"). It
// checks syntax only; legality needs a position (CheckMove).
func ParseMove(s string) (Move, error) {
	m, msg := parseMove(s)
	if msg == "" {
		return m, nil
	}
	return NoMove, fmt.Errorf("%w: %q: %s (want e.g. h3e3 or b10c8%s)", ErrBadMove, textcut.Quote(s, 16, "…"), msg, moveHint(s))
}

func parseMove(s string) (Move, string) {
	from, n, msg := parseSquarePrefix(s)
	if msg != "" {
		return NoMove, msg
	}
	to, n2, msg := parseSquarePrefix(s[n:])
	switch {
	case msg != "":
		return NoMove, msg
	case n+n2 != len(s):
		return NoMove, "unexpected text after the destination square"
	}
	return NewMove(from, to), ""
}

// moveHint names the likely slip of a move that is not coordinates, for
// the client developer who reads the refusal.
func moveHint(s string) string {
	switch {
	case okMove(strings.ToLower(s)):
		return "; coordinates are lower case"
	case okMove(strings.NewReplacer("-", "", " ", "").Replace(s)):
		return "; the two squares are written together"
	case strings.ContainsAny(s, ".+=") || strings.IndexFunc(s, func(r rune) bool { return r >= utf8.RuneSelf }) >= 0:
		return "; readable notation (WXF, Korean) is for display only: send coordinates"
	}
	return ""
}

func okMove(s string) bool {
	_, msg := parseMove(s)
	return msg == ""
}
