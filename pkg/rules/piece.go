package rules

import (
	"fmt"
	"strings"
)

// Side is a player. First is Cho in Janggi and Red in Xiangqi; it moves first
// and is written in upper case in FEN.
type Side uint8

const (
	First  Side = 0
	Second Side = 1
)

// Opponent returns the other side.
func (s Side) Opponent() Side { return s ^ 1 }

func (s Side) String() string {
	switch s {
	case First:
		return "first"
	case Second:
		return "second"
	}
	return fmt.Sprintf("Side(%d)", uint8(s))
}

// ParseSide accepts the names String and SideName return (first and
// second; cho and han, red and black), in any letter case. Side names are
// written in credentials, AI jobs and stored records: every reader goes
// through here, so all accept the same names.
func ParseSide(s string) (Side, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "first", "cho", "red":
		return First, nil
	case "second", "han", "black":
		return Second, nil
	}
	return 0, fmt.Errorf("unknown side %q (want first or second)", s)
}

// Kind is a piece type, the same set in both games. Guard is the Xiangqi advisor.
type Kind uint8

const (
	NoKind Kind = iota
	General
	Guard
	Elephant
	Horse
	Chariot
	Cannon
	Soldier
)

var kindNames = [...]string{"none", "general", "guard", "elephant", "horse", "chariot", "cannon", "soldier"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// displayName is the name a player of v expects in a message.
func (k Kind) displayName(v Variant) string {
	if k == Guard && v == Xiangqi {
		return "advisor"
	}
	return k.String()
}

// Piece is a side and a kind: kind in the low three bits, side in bit 3, so
// the zero value is NoPiece and both fields are one mask away.
type Piece uint8

const NoPiece Piece = 0

// MakePiece returns NoPiece for an invalid side or kind.
func MakePiece(s Side, k Kind) Piece {
	if s > Second || k == NoKind || k > Soldier {
		return NoPiece
	}
	return mkPiece(s, k)
}

func mkPiece(s Side, k Kind) Piece { return Piece(s)<<3 | Piece(k) }

// Side is meaningless for NoPiece.
func (p Piece) Side() Side { return Side(p >> 3 & 1) }
func (p Piece) Kind() Kind { return Kind(p & 7) }

const pieceLetters = ".KABNRCP"

// Letter is the FEN letter: upper case for First, '.' for NoPiece.
func (p Piece) Letter() byte {
	k := p.Kind()
	if p == NoPiece || k == NoKind {
		return '.'
	}
	c := pieceLetters[k]
	if p.Side() == Second {
		c += 'a' - 'A'
	}
	return c
}

func (p Piece) String() string { return string(p.Letter()) }

// pieceFromLetter also accepts e (elephant) and h (horse), which some
// Janggi and Xiangqi sources use instead of b and n.
func pieceFromLetter(c byte) Piece {
	side := First
	if c >= 'a' && c <= 'z' {
		side = Second
		c -= 'a' - 'A'
	}
	var k Kind
	switch c {
	case 'K':
		k = General
	case 'A':
		k = Guard
	case 'B', 'E':
		k = Elephant
	case 'N', 'H':
		k = Horse
	case 'R':
		k = Chariot
	case 'C':
		k = Cannon
	case 'P':
		k = Soldier
	default:
		return NoPiece
	}
	return mkPiece(side, k)
}

// janggiValue holds the Janggi point values used for scoring.
var janggiValue = [8]int{Guard: 3, Elephant: 3, Horse: 5, Chariot: 13, Cannon: 7, Soldier: 2}

// maxPerKind is how many of each kind a side starts with; a FEN with more
// cannot come from a game (there is no promotion) and would overflow the piece lists.
var maxPerKind = [8]int{General: 1, Guard: 2, Elephant: 2, Horse: 2, Chariot: 2, Cannon: 2, Soldier: 5}

const maxOfKind = 5
