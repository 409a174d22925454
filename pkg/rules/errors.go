package rules

import "errors"

// Sentinel errors. Callers (the rules and game services) map these to status
// codes with errors.Is, so every error this package returns wraps one of them.
var (
	// ErrIllegalMove: the move is well formed but not legal in the position.
	ErrIllegalMove = errors.New("illegal move")
	// ErrBadFEN: the FEN text cannot be parsed or describes an impossible position.
	ErrBadFEN = errors.New("bad FEN")
	// ErrBadMove: the move text is not of the form <from><to>.
	ErrBadMove = errors.New("bad move syntax")
)

// MoveError explains why a move is illegal. Reason is meant for people
// ("the horse is blocked at e6"); the move is kept so the message can name it.
type MoveError struct {
	Move   Move
	Reason string
}

func (e *MoveError) Error() string { return "move " + e.Move.String() + ": " + e.Reason }

// Unwrap lets errors.Is(err, ErrIllegalMove) hold for every MoveError.
func (e *MoveError) Unwrap() error { return ErrIllegalMove }
