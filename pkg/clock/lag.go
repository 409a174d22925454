package clock

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// LagPolicy configures lag compensation; the zero value disables it. See
// the package documentation for how the credit is computed.
type LagPolicy struct {
	MaxPerMove    time.Duration // largest credit for one move
	BankCap       time.Duration // a player's bank never exceeds this; banks start full
	RefillPerMove time.Duration // added to the mover's bank after each move
}

// Bounds enforced by [LagPolicy.Validate].
const (
	// MaxReportedLag is the largest lag report taken seriously: a client
	// claiming more is broken or lying, so its report counts as 0 rather
	// than being clamped to a generous credit.
	MaxReportedLag = time.Minute
	MaxLagPerMove  = 10 * time.Second
	MaxLagBank     = 5 * time.Minute
)

// ErrInvalidLagPolicy is wrapped by every error of [LagPolicy.Validate].
var ErrInvalidLagPolicy = errors.New("invalid lag policy")

// Validate reports every problem of l at once; nil means valid.
func (l LagPolicy) Validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidLagPolicy}, args...)...))
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"max per move", l.MaxPerMove}, {"bank cap", l.BankCap}, {"refill per move", l.RefillPerMove}} {
		if f.d < 0 {
			add("%s %v is negative", f.name, f.d)
		} else if f.d%time.Millisecond != 0 {
			add("%s %v is not a whole number of milliseconds", f.name, f.d)
		}
	}
	if l.MaxPerMove > MaxLagPerMove {
		add("max per move %v exceeds %v", l.MaxPerMove, MaxLagPerMove)
	}
	if l.BankCap > MaxLagBank {
		add("bank cap %v exceeds %v", l.BankCap, MaxLagBank)
	}
	if l.RefillPerMove > l.BankCap && l.BankCap >= 0 {
		add("refill per move %v exceeds the bank cap %v", l.RefillPerMove, l.BankCap)
	}
	return errors.Join(errs...)
}

// credit is the time given back to a mover who reports the given lag after
// elapsedMs on the server, with bankMs in its bank.
func (l LagPolicy) credit(bankMs int64, reported time.Duration, elapsedMs int64) int64 {
	if reported <= 0 || reported > MaxReportedLag {
		return 0
	}
	return max(0, min(reported.Milliseconds(), l.graceMs(bankMs), elapsedMs))
}

// graceMs is the largest credit any report could obtain with this bank.
func (l LagPolicy) graceMs(bankMs int64) int64 {
	return max(0, min(msOf(l.MaxPerMove), l.bank(bankMs), MaxReportedLag.Milliseconds()))
}

// bank clamps a stored bank into [0, BankCap], so that a policy changed
// mid-game or a corrupted value cannot hand out more than the cap.
func (l LagPolicy) bank(bankMs int64) int64 {
	return max(0, min(bankMs, msOf(l.BankCap)))
}

// afterMove is the bank once the credit is debited and the refill added.
func (l LagPolicy) afterMove(bankMs, creditMs int64) int64 {
	return l.bank(l.bank(bankMs) - creditMs + msOf(l.RefillPerMove))
}

type lagJSON struct {
	MaxPerMoveMs    int64 `json:"max_per_move_ms,omitempty"`
	BankCapMs       int64 `json:"bank_cap_ms,omitempty"`
	RefillPerMoveMs int64 `json:"refill_per_move_ms,omitempty"`
}

// MarshalJSON stores durations as milliseconds, like the rest of the State.
func (l LagPolicy) MarshalJSON() ([]byte, error) {
	return json.Marshal(lagJSON{l.MaxPerMove.Milliseconds(), l.BankCap.Milliseconds(), l.RefillPerMove.Milliseconds()})
}

// UnmarshalJSON is the inverse of MarshalJSON; it does not validate.
func (l *LagPolicy) UnmarshalJSON(b []byte) error {
	var j lagJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	m, err1 := durationFromMs("max_per_move_ms", j.MaxPerMoveMs)
	c, err2 := durationFromMs("bank_cap_ms", j.BankCapMs)
	r, err3 := durationFromMs("refill_per_move_ms", j.RefillPerMoveMs)
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	*l = LagPolicy{MaxPerMove: m, BankCap: c, RefillPerMove: r}
	return nil
}
