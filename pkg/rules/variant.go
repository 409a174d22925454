package rules

import (
	"fmt"
	"strings"
)

// Variant selects the game whose rules apply.
type Variant uint8

const (
	Janggi  Variant = 1
	Xiangqi Variant = 2
)

func (v Variant) String() string {
	switch v {
	case Janggi:
		return "janggi"
	case Xiangqi:
		return "xiangqi"
	}
	return fmt.Sprintf("Variant(%d)", uint8(v))
}

// Valid reports whether v is Janggi or Xiangqi.
func (v Variant) Valid() bool { return v == Janggi || v == Xiangqi }

// ParseVariant accepts the names String returns, in any letter case.
func ParseVariant(s string) (Variant, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "janggi":
		return Janggi, nil
	case "xiangqi":
		return Xiangqi, nil
	}
	return 0, fmt.Errorf("unknown variant %q (want janggi or xiangqi)", s)
}
