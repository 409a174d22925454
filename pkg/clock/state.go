package clock

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Side identifies a player. The values match rules.Side (First = Cho/Red =
// 0, Second = Han/Black = 1) so the game service can convert directly,
// while this package stays free of the rules dependency.
type Side uint8

// The two sides.
const (
	First  Side = 0
	Second Side = 1
)

// Opponent is the other side.
func (s Side) Opponent() Side { return s ^ 1 }

func (s Side) valid() bool { return s <= Second }

func (s Side) String() string {
	switch s {
	case First:
		return "first"
	case Second:
		return "second"
	}
	return "side(" + strconv.Itoa(int(s)) + ")"
}

// Phase says whether a clock runs.
type Phase uint8

// Phases of a State. Idle is the zero value: created, not started.
const (
	Idle Phase = iota
	Running
	Stopped
)

var phaseNames = [...]string{Idle: "idle", Running: "running", Stopped: "stopped"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "phase(" + strconv.Itoa(int(p)) + ")"
}

// MarshalText encodes the phase by name.
func (p Phase) MarshalText() ([]byte, error) {
	if int(p) >= len(phaseNames) {
		return nil, fmt.Errorf("clock: cannot encode unknown %v", p)
	}
	return []byte(phaseNames[p]), nil
}

// UnmarshalText is the inverse of MarshalText.
func (p *Phase) UnmarshalText(b []byte) error {
	for i, n := range phaseNames {
		if string(b) == n {
			*p = Phase(i)
			return nil
		}
	}
	return fmt.Errorf("clock: unknown phase %q", b)
}

// Errors returned by State methods; test with errors.Is.
var (
	// ErrFlagged: the mover's time ran out before the move (the error is a
	// *FlagError), or Start was asked to resume a game lost on time.
	ErrFlagged    = errors.New("flagged")
	ErrNotRunning = errors.New("clock is not running")
	ErrRunning    = errors.New("clock is already running")
	// ErrInvalidState wraps the problems found by State.Validate and bad
	// Side arguments.
	ErrInvalidState = errors.New("invalid clock state")
)

// FlagError is returned by Move when the mover was out of time.
type FlagError struct {
	Side Side
	// Deadline is the last instant at which this move would have been in
	// time: the turn start plus the mover's whole budget plus the lag
	// credit this move earned.
	Deadline time.Time
	// FlaggedAt is when the mover lost: Deadline plus one millisecond, the
	// first instant that is out of time.
	FlaggedAt time.Time
	MovedAt   time.Time
}

func (e *FlagError) Error() string {
	return fmt.Sprintf("clock: %v flagged at %s (deadline %s, move at %s)", e.Side,
		e.FlaggedAt.Format(time.RFC3339Nano), e.Deadline.Format(time.RFC3339Nano), e.MovedAt.Format(time.RFC3339Nano))
}

func (e *FlagError) Unwrap() error { return ErrFlagged }

// PlayerClock is one player's clock as of a reference instant: the running
// side's turn start in a State, the snapshot instant in a Snapshot.
type PlayerClock struct {
	MainMs int64 `json:"main_ms"`
	// Periods left, counting the current one; 0 once flagged (and always
	// 0 outside byo-yomi controls).
	Periods int `json:"periods,omitempty"`
	// PeriodMs is what is left of the current period: the full period
	// except while the player's own turn is under way (in a Snapshot) or
	// was interrupted by Stop.
	PeriodMs int64 `json:"period_ms,omitempty"`
	// InByoYomi is MainMs == 0 under a byo-yomi control. It is redundant
	// but saves every reader from knowing that rule.
	InByoYomi bool  `json:"in_byoyomi,omitempty"`
	Flagged   bool  `json:"flagged,omitempty"`
	LagBankMs int64 `json:"lag_bank_ms,omitempty"`
}

// Main is the main time left.
func (p PlayerClock) Main() time.Duration { return time.Duration(clampMs(p.MainMs)) * time.Millisecond }

// Period is the time left in the current byo-yomi period.
func (p PlayerClock) Period() time.Duration {
	return time.Duration(clampMs(p.PeriodMs)) * time.Millisecond
}

// LagBank is the lag compensation the player has in reserve.
func (p PlayerClock) LagBank() time.Duration {
	return time.Duration(clampMs(p.LagBankMs)) * time.Millisecond
}

// State is a game's clock. It is a plain value: copy it, compare it with
// ==, store it as JSON; every method returns a new State.
type State struct {
	Control Control   `json:"control"`
	Lag     LagPolicy `json:"lag,omitzero"`
	Phase   Phase     `json:"phase"`
	// Turn is the side whose clock runs; when stopped, the side that was
	// to move.
	Turn Side `json:"turn"`
	// TurnStartMs is the Unix time in milliseconds at which Turn's clock
	// started or resumed; when stopped, the instant it stopped.
	TurnStartMs int64 `json:"turn_start_ms"`
	// ExcusedMs is time of the running turn that is not charged, as if
	// the turn had started that much later (see Excuse); 0 once the turn
	// ends.
	ExcusedMs int64          `json:"excused_ms,omitempty"`
	Players   [2]PlayerClock `json:"players"`
}

// New is an idle clock with both players at the start of control c. It does
// not validate c; call c.Validate first.
func New(c Control) State {
	var p PlayerClock
	switch c.Kind {
	case ByoYomi:
		p = PlayerClock{MainMs: msOf(c.MainTime), Periods: c.Periods, PeriodMs: msOf(c.PeriodTime)}
		p.InByoYomi = p.MainMs == 0
	case Fischer:
		// The increment is added after each move, the first one included,
		// never up front.
		p = PlayerClock{MainMs: msOf(c.MainTime)}
	}
	return State{Control: c, Players: [2]PlayerClock{p, p}}
}

// WithLag sets the lag policy and fills both banks to its cap. It is meant
// for a new game; mid-game it would refill the banks.
func (s State) WithLag(l LagPolicy) State {
	s.Lag = l
	for i := range s.Players {
		s.Players[i].LagBankMs = msOf(l.BankCap)
	}
	return s
}

// Start runs side's clock from now. It also resumes a stopped game, with
// each player's clock as Stop left it (a period cut short stays short).
func (s State) Start(now time.Time, side Side) (State, error) {
	switch {
	case !side.valid():
		return s, fmt.Errorf("clock: start: %w: side %v", ErrInvalidState, side)
	case s.Phase == Running:
		return s, fmt.Errorf("clock: start: %w", ErrRunning)
	case s.Players[0].Flagged || s.Players[1].Flagged:
		return s, fmt.Errorf("clock: start: game already lost on time: %w", ErrFlagged)
	}
	s.Phase, s.Turn, s.TurnStartMs, s.ExcusedMs = Running, side, clampInstant(unixMs(now)), 0
	return s, nil
}

// Excuse leaves total of the running turn so far uncharged, as if the turn
// had started that much later: time in which the side could not move for
// want of the service. Excusing is idempotent: the largest total given
// during a turn counts, never more than the turn has lasted by now. Every
// deadline and milestone of the turn moves later by what is newly excused.
// A State that is not running is returned unchanged.
func (s State) Excuse(total time.Duration, now time.Time) State {
	if !s.running() {
		return s
	}
	ms := min(msOf(total), max(0, unixMs(now)-clampInstant(s.TurnStartMs)))
	s.ExcusedMs = max(s.excusedMs(), ms)
	return s
}

func (s State) excusedMs() int64 { return clampMs(s.ExcusedMs) }

// chargedFrom is the instant from which the running turn is charged: its
// start, moved later by the time excused.
func (s State) chargedFrom() int64 { return clampInstant(clampInstant(s.TurnStartMs) + s.excusedMs()) }

// running reports whether a side's clock runs; a corrupt Turn counts as not
// running so that no method indexes out of range.
func (s State) running() bool { return s.Phase == Running && s.Turn.valid() }

// elapsed is the time spent on the current turn as of nowMs, never negative.
func (s State) elapsed(nowMs int64) int64 { return max(0, nowMs-s.chargedFrom()) }

// Move commits the running side's move at now, the server's receipt time,
// with the lag the client reported (0 if none). The mover is charged the
// elapsed time minus the lag credit; byo-yomi periods that fully ran out
// are lost and the period resets; the Fischer increment is added; the
// opponent's clock starts at now.
//
// If the charged time exceeds the mover's budget, the move is late: Move
// returns a *FlagError (errors.Is ErrFlagged) and the State stopped with the
// mover flagged. A move whose charged time equals the budget exactly is in
// time.
func (s State) Move(now time.Time, reportedLag time.Duration) (State, error) {
	next, _, err := s.endTurn(now, reportedLag, true)
	return next, err
}

// Earned is what a move gave its mover on top of the time it was charged:
// the Fischer increment, the byo-yomi period filled again, the refill of
// the lag bank. An undo withdraws it (TakeBack), or each move and undo
// would add time.
type Earned struct {
	MainMs   int64
	PeriodMs int64
	LagMs    int64
}

// MoveEarning is Move, also telling what the move earned its mover.
func (s State) MoveEarning(now time.Time, reportedLag time.Duration) (State, Earned, error) {
	return s.endTurn(now, reportedLag, true)
}

// Credit is the lag credit a move at now reporting reportedLag is given:
// Move charges the mover that much less than the time elapsed, so the
// move counts as made that much earlier. Zero when no clock runs, for an
// untimed control, or for a report that earns nothing.
func (s State) Credit(now time.Time, reportedLag time.Duration) time.Duration {
	r := rulesOf(s.Control)
	if !s.running() || !r.timed() {
		return 0
	}
	p := r.norm(s.Players[s.Turn])
	return time.Duration(s.Lag.credit(p.LagBankMs, reportedLag, s.elapsed(unixMs(now)))) * time.Millisecond
}

// Yield ends the running side's turn without a move and starts the other
// side's clock, as an undo that hands the turn back does. The side is
// charged its turn as for a move (byo-yomi periods that ran out are lost
// and the current one resets), with no lag credit, no change to its lag
// bank and no Fischer increment, since it made no move. A side out of
// time gets a *FlagError, as from Move.
func (s State) Yield(now time.Time) (State, error) {
	next, _, err := s.endTurn(now, 0, false)
	return next, err
}

// endTurn is MoveEarning, or Yield when moved is false (which earns
// nothing that an undo could take back).
func (s State) endTurn(now time.Time, reportedLag time.Duration, moved bool) (State, Earned, error) {
	what := "move"
	if !moved {
		what = "yield"
	}
	if s.Phase != Running {
		return s, Earned{}, fmt.Errorf("clock: %s: %w", what, ErrNotRunning)
	}
	if !s.Turn.valid() {
		return s, Earned{}, fmt.Errorf("clock: %s: %w: turn %v", what, ErrInvalidState, s.Turn)
	}
	r := rulesOf(s.Control)
	nowMs := unixMs(now)
	start := clampInstant(s.TurnStartMs)
	mover := s.Turn
	next := s
	next.Turn = mover.Opponent()
	// Monotonic even if the server's clock stepped back, and within the
	// range a stored state may hold.
	next.TurnStartMs = clampInstant(max(nowMs, start))
	next.ExcusedMs = 0
	if !r.timed() {
		return next, Earned{}, nil
	}
	p := r.norm(s.Players[mover])
	e := s.elapsed(nowMs)
	var credit int64
	if moved {
		credit = s.Lag.credit(p.LagBankMs, reportedLag, e)
	}
	spent, budget := e-credit, r.budget(p)
	if spent > budget {
		out := s
		out.Phase = Stopped
		out.TurnStartMs, out.ExcusedMs = next.TurnStartMs, 0
		out.Players[mover] = r.flagged(p)
		dl := s.chargedFrom() + budget + credit
		return out, Earned{}, &FlagError{Side: mover, Deadline: instant(dl), FlaggedAt: instant(dl + 1), MovedAt: now}
	}
	p = r.spend(p, spent)
	var earned Earned
	if moved {
		bank := s.Lag.afterMove(p.LagBankMs, credit)
		earned.LagMs = max(0, bank-(s.Lag.bank(p.LagBankMs)-credit))
		p.LagBankMs = bank
	}
	switch {
	case r.kind == ByoYomi:
		if moved {
			earned.PeriodMs = r.periodMs - p.PeriodMs
		}
		p.PeriodMs = r.periodMs
	case r.kind == Fischer && moved:
		inc := clampMs(p.MainMs + r.incMs)
		earned.MainMs = inc - p.MainMs
		p.MainMs = inc
	}
	next.Players[mover] = p
	return next, earned, nil
}

// TakeBack withdraws what moves taken back earned (see Earned), earned[side]
// for each side. A player goes on with what was left when the move was
// made: the main time without its increment, the period as the move found
// it (less any spent since, periods used up by it lost), the lag bank less
// its refill. ok is false, and s returned unchanged, when a side would have
// no time left without it (the running side's budget spent by now, or the
// other's gone), or when earned is no move's (negative, or a period
// filled while main time is left).
func (s State) TakeBack(now time.Time, earned [2]Earned) (taken State, ok bool) {
	r := rulesOf(s.Control)
	if !r.timed() || earned == [2]Earned{} {
		return s, true
	}
	out := s
	for side := range out.Players {
		e := earned[side]
		if e == (Earned{}) {
			continue
		}
		if e.MainMs < 0 || e.PeriodMs < 0 || e.LagMs < 0 {
			return s, false
		}
		p := r.norm(out.Players[side])
		p.MainMs -= e.MainMs
		if r.kind == ByoYomi && e.PeriodMs > 0 {
			if p.MainMs > 0 || r.periodMs <= 0 {
				// No move fills a period while main time is left.
				return s, false
			}
			// More than is left of the current period (a player whose
			// period an earlier take-back left short) spills into the
			// next ones, as time spent does.
			p.PeriodMs -= e.PeriodMs
			for p.PeriodMs < 0 && p.Periods > 1 {
				p.Periods--
				p.PeriodMs += r.periodMs
			}
		}
		p.LagBankMs = max(0, p.LagBankMs-e.LagMs)
		if e.MainMs > 0 || e.PeriodMs > 0 {
			if p.MainMs < 0 || p.PeriodMs < 0 || r.budget(p) <= 0 {
				return s, false
			}
		}
		out.Players[side] = r.norm(p)
	}
	if out.OutOfBudget(now) {
		return s, false
	}
	return out, true
}

// Stop ends or pauses the game at now: the running side is charged the time
// of its unfinished turn (periods included, no increment) and every value
// is kept for display and for a later Start. A State that is not running is
// returned unchanged.
func (s State) Stop(now time.Time) State {
	if !s.running() {
		return s
	}
	nowMs := unixMs(now)
	r := rulesOf(s.Control)
	if r.timed() {
		p := r.norm(s.Players[s.Turn])
		s.Players[s.Turn] = r.view(p, s.elapsed(nowMs), s.Lag.graceMs(p.LagBankMs))
	}
	s.Phase = Stopped
	s.TurnStartMs = clampInstant(max(nowMs, s.TurnStartMs))
	s.ExcusedMs = 0
	return s
}

// deadlineMs is the last in-time instant of the running side, grace
// included; ok is false when nothing can flag.
func (s State) deadlineMs() (ms int64, ok bool) {
	r := rulesOf(s.Control)
	if !s.running() || !r.timed() {
		return 0, false
	}
	p := r.norm(s.Players[s.Turn])
	return s.chargedFrom() + r.budget(p) + s.Lag.graceMs(p.LagBankMs), true
}

// Deadline is the last instant at which the running side can still move in
// time (its whole budget, plus the lag grace if a policy is set); it
// flags one millisecond later. ok is false when no clock runs or the
// control is None.
func (s State) Deadline() (deadline time.Time, ok bool) {
	ms, ok := s.deadlineMs()
	if !ok {
		return time.Time{}, false
	}
	return instant(ms), true
}

// Flag reports whether the running side is out of time as of now, that is
// now is after Deadline.
func (s State) Flag(now time.Time) bool {
	d, ok := s.deadlineMs()
	return ok && unixMs(now) > d
}

// OutOfBudget reports whether the running side has used its whole budget
// before now, lag grace not counted: the grace forgives the network delay
// of a move, and a command that is no move has none to forgive.
func (s State) OutOfBudget(now time.Time) bool {
	r := rulesOf(s.Control)
	if !s.running() || !r.timed() {
		return false
	}
	return unixMs(now) > s.chargedFrom()+r.budget(r.norm(s.Players[s.Turn]))
}

// Snapshot is both clocks as of an instant, for display and for checks.
type Snapshot struct {
	At      time.Time      `json:"at"`
	Phase   Phase          `json:"phase"`
	Turn    Side           `json:"turn"`
	Players [2]PlayerClock `json:"players"`
}

// Snapshot computes both clocks as of now without changing s. The running
// side shows exactly what a Move at now without lag credit would charge it
// before the period reset or increment; during the lag grace it shows zero
// without the flag.
func (s State) Snapshot(now time.Time) Snapshot {
	snap := Snapshot{At: now, Phase: s.Phase, Turn: s.Turn, Players: s.Players}
	r := rulesOf(s.Control)
	if s.running() && r.timed() {
		p := r.norm(s.Players[s.Turn])
		snap.Players[s.Turn] = r.view(p, s.elapsed(unixMs(now)), s.Lag.graceMs(p.LagBankMs))
	}
	return snap
}

// Validate checks a State loaded from storage; it reports every problem at
// once, each wrapping ErrInvalidState (or ErrInvalidControl /
// ErrInvalidLagPolicy). The other methods never panic on an invalid State,
// but their results for one are only "something safe".
func (s State) Validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidState}, args...)...))
	}
	if err := s.Control.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := s.Lag.Validate(); err != nil {
		errs = append(errs, err)
	}
	if s.Phase > Stopped {
		add("unknown %v", s.Phase)
	}
	if !s.Turn.valid() {
		add("turn is %v", s.Turn)
	}
	if s.TurnStartMs != clampInstant(s.TurnStartMs) {
		add("turn start %d out of range", s.TurnStartMs)
	}
	if s.ExcusedMs != 0 && (s.ExcusedMs != clampMs(s.ExcusedMs) || !s.running()) {
		add("%dms excused in a %v game", s.ExcusedMs, s.Phase)
	}
	c := s.Control
	for i, p := range s.Players {
		side := Side(i)
		if p.LagBankMs < 0 || p.LagBankMs > s.Lag.BankCap.Milliseconds() {
			add("%v: lag bank %dms outside 0..%v", side, p.LagBankMs, s.Lag.BankCap)
		}
		if p.Flagged && s.Phase != Stopped {
			add("%v flagged in a %v game", side, s.Phase)
		}
		switch c.Kind {
		case ByoYomi:
			if p.MainMs < 0 || p.MainMs > c.MainTime.Milliseconds() {
				add("%v: main time %dms outside 0..%v", side, p.MainMs, c.MainTime)
			}
			if p.Periods < 0 || p.Periods > c.Periods {
				add("%v: %d periods outside 0..%d", side, p.Periods, c.Periods)
			}
			if p.PeriodMs < 0 || p.PeriodMs > c.PeriodTime.Milliseconds() {
				add("%v: period %dms outside 0..%v", side, p.PeriodMs, c.PeriodTime)
			}
			if p.MainMs > 0 && p.PeriodMs != c.PeriodTime.Milliseconds() {
				// Periods are only spent once main time is gone.
				add("%v: period %dms is not full with main time left", side, p.PeriodMs)
			}
			if p.InByoYomi != (p.MainMs == 0) {
				add("%v: in_byoyomi %v with %dms of main time", side, p.InByoYomi, p.MainMs)
			}
			if p.Flagged != (p.Periods == 0) {
				add("%v: flagged %v with %d periods", side, p.Flagged, p.Periods)
			}
		case Fischer:
			if p.MainMs < 0 || p.MainMs > maxMs {
				add("%v: main time %dms out of range", side, p.MainMs)
			}
			if p.Periods != 0 || p.PeriodMs != 0 || p.InByoYomi {
				add("%v: byo-yomi values under a Fischer control", side)
			}
			if p.Flagged && p.MainMs != 0 {
				add("%v: flagged with %dms left", side, p.MainMs)
			}
		case None:
			if p.MainMs != 0 || p.Periods != 0 || p.PeriodMs != 0 || p.InByoYomi || p.Flagged {
				add("%v: clock values under a no-clock control", side)
			}
		}
	}
	return errors.Join(errs...)
}
