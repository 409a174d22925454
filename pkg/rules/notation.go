package rules

import "fmt"

// Notation writes a legal move of p for people: WXF for Xiangqi (see WXF)
// and Korean record notation for Janggi (see JanggiNotation). It is what
// Game.Play puts in MoveInfo.Notation. An illegal move gives an error
// wrapping ErrIllegalMove.
func Notation(p *Position, m Move) (string, error) {
	if p == nil {
		return "", fmt.Errorf("%w: no position", ErrBadMove)
	}
	if err := p.CheckMove(m); err != nil {
		return "", err
	}
	return notationOf(p, m), nil
}

// ParseNotation reads a move written in the notation Notation uses for p's
// variant (with the alternatives that ParseWXF and ParseJanggiNotation
// accept).
func ParseNotation(p *Position, s string) (Move, error) {
	if p == nil {
		return NoMove, fmt.Errorf("%w: no position", ErrBadMove)
	}
	if p.Variant() == Xiangqi {
		return ParseWXF(p, s)
	}
	return ParseJanggiNotation(p, s)
}

// notationOf is Notation for a move already known to be legal.
func notationOf(p *Position, m Move) string {
	if p.Variant() == Xiangqi {
		return wxf(p, m)
	}
	return janggiNotation(p, m)
}

// SideName is how players of v call side s: Cho or Han, Red or Black.
func SideName(v Variant, s Side) string {
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

// kindName is the name a player of v gives to k (Xiangqi's guard is the
// advisor).
func kindName(v Variant, k Kind) string {
	if k == Guard && v == Xiangqi {
		return "advisor"
	}
	return k.String()
}
