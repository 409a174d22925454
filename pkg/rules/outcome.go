package rules

import "fmt"

// Method says why a game ended. The numeric values follow the EndMethod enum
// of proto/palace/common/v1 (None there is END_METHOD_UNSPECIFIED), so a
// service can convert with a plain cast.
type Method uint8

const (
	None Method = iota
	Checkmate
	// Stalemate is a Xiangqi loss for the side with no legal move.
	Stalemate
	Bikjang
	// Repetition: third repetition decided by points (Janggi) or drawn (Xiangqi).
	Repetition
	PerpetualCheck
	PerpetualChase
	TwoPasses
	// MoveLimit: 200 plies in Janggi (points), 120 plies without capture in Xiangqi (draw).
	MoveLimit
	InsufficientMaterial
	Resignation
	Timeout
	Agreement
)

var methodNames = [...]string{
	None:                 "",
	Checkmate:            "checkmate",
	Stalemate:            "stalemate",
	Bikjang:              "bikjang",
	Repetition:           "repetition",
	PerpetualCheck:       "perpetual_check",
	PerpetualChase:       "perpetual_chase",
	TwoPasses:            "two_passes",
	MoveLimit:            "move_limit",
	InsufficientMaterial: "insufficient_material",
	Resignation:          "resignation",
	Timeout:              "timeout",
	Agreement:            "agreement",
}

// String is the snake_case name stored by the services; None is "".
func (m Method) String() string {
	if int(m) < len(methodNames) {
		return methodNames[m]
	}
	return fmt.Sprintf("Method(%d)", uint8(m))
}

// Winner names who won; NoWinner means the game is still going.
type Winner uint8

const (
	NoWinner Winner = iota
	FirstWins
	SecondWins
	Draw
)

var winnerNames = [...]string{NoWinner: "", FirstWins: "first", SecondWins: "second", Draw: "draw"}

func (w Winner) String() string {
	if int(w) < len(winnerNames) {
		return winnerNames[w]
	}
	return fmt.Sprintf("Winner(%d)", uint8(w))
}

// winnerFor converts a side into the Winner that names it.
func winnerFor(s Side) Winner {
	if s == First {
		return FirstWins
	}
	return SecondWins
}

// Outcome is the state of a game's result. Points holds both sides' Janggi
// totals (index by Side; Han's include the 1.5): final once Ended, current
// while the game goes on, and zero in Xiangqi, which has no points.
type Outcome struct {
	Ended  bool
	Winner Winner
	Method Method
	Points [2]float64
}

func (o Outcome) String() string {
	if !o.Ended {
		return "ongoing"
	}
	return o.Winner.String() + " by " + o.Method.String()
}
