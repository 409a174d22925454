package rules

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Board geometry. Ranks count from the first player's side.
const (
	NumFiles   = 9
	NumRanks   = 10
	NumSquares = NumFiles * NumRanks
)

// Square is file + 9*rank: a1 = 0, i1 = 8, a2 = 9, i10 = 89.
type Square int8

// NoSquare marks an absent square (for example a general that is not on the board).
const NoSquare Square = -1

// squareNames is filled once so String never allocates; move lists are printed often.
var squareNames = func() (n [NumSquares]string) {
	for s := range n {
		n[s] = string(rune('a'+s%NumFiles)) + strconv.Itoa(s/NumFiles+1)
	}
	return n
}()

// SquareAt returns the square on 0-based file and rank, or NoSquare if off the board.
func SquareAt(file, rank int) Square {
	if file < 0 || file >= NumFiles || rank < 0 || rank >= NumRanks {
		return NoSquare
	}
	return Square(file + NumFiles*rank)
}

// File is 0-based: 0 is file a.
func (s Square) File() int { return int(s) % NumFiles }

// Rank is 0-based: 0 is rank 1.
func (s Square) Rank() int { return int(s) / NumFiles }

// Valid reports whether s is on the board.
func (s Square) Valid() bool { return s >= 0 && s < NumSquares }

func (s Square) String() string {
	if !s.Valid() {
		return "-"
	}
	return squareNames[s]
}

// ParseSquare reads "e2" or "b10" (lower-case file a-i, rank 1-10).
func ParseSquare(str string) (Square, error) {
	sq, n, msg := parseSquarePrefix(str)
	if msg == "" && n != len(str) {
		msg = "unexpected text after the square"
	}
	if msg != "" {
		return NoSquare, fmt.Errorf("%w: square %q: %s", ErrBadMove, str, msg)
	}
	return sq, nil
}

// parseSquarePrefix reads one square at the start of s and returns how many
// bytes it used. A rank "10" is taken greedily: no square starts with '0', so
// "a10a1" can only mean a10 then a1.
func parseSquarePrefix(s string) (Square, int, string) {
	if len(s) == 0 {
		return NoSquare, 0, "missing square"
	}
	f := s[0]
	if f < 'a' || f > 'i' {
		// Named as the character it starts, not as a lone byte: 'é', not 'Ã'.
		r, _ := utf8.DecodeRuneInString(s)
		return NoSquare, 0, fmt.Sprintf("file %q is not a-i", r)
	}
	if len(s) >= 2 && s[1] == '0' {
		return NoSquare, 0, "rank 0 is not 1-10"
	}
	if len(s) < 2 || s[1] < '1' || s[1] > '9' {
		return NoSquare, 0, "missing rank 1-10 after the file"
	}
	if len(s) >= 3 && s[1] == '1' && s[2] == '0' {
		return SquareAt(int(f-'a'), 9), 3, ""
	}
	return SquareAt(int(f-'a'), int(s[1]-'1')), 2, ""
}

// palaceSide[sq] is palaceOf(sq), looked up in the attack test.
var palaceSide = func() (t [NumSquares]int8) {
	for sq := range t {
		t[sq] = int8(palaceOf(sq))
	}
	return t
}()

// palaceOf returns the side whose palace contains sq, or -1.
func palaceOf(sq int) int {
	f, r := sq%NumFiles, sq/NumFiles
	if f < 3 || f > 5 {
		return -1
	}
	switch {
	case r <= 2:
		return int(First)
	case r >= 7:
		return int(Second)
	}
	return -1
}

// ownHalf reports whether sq is on side s's side of the Xiangqi river.
func ownHalf(s Side, sq int) bool {
	if s == First {
		return sq/NumFiles <= 4
	}
	return sq/NumFiles >= 5
}
