package clock

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// t0 is an arbitrary whole-millisecond turn start; at(ms) is t0 plus ms.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

const (
	sec  = int64(1000)
	mins = 60 * sec
)

var (
	fischer3p2 = Control{Kind: Fischer, MainTime: 3 * time.Minute, Increment: 2 * time.Second}
	pureByo    = Control{Kind: ByoYomi, Periods: 3, PeriodTime: 30 * time.Second}
	lag1s      = LagPolicy{MaxPerMove: time.Second, BankCap: 3 * time.Second, RefillPerMove: 500 * time.Millisecond}
)

// started is New(c) with the policy, First's clock running from t0.
func started(t *testing.T, c Control, l LagPolicy) State {
	t.Helper()
	s, err := New(c).WithLag(l).Start(t0, First)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// withFirst replaces First's stored clock, for tests starting mid-game.
func withFirst(p PlayerClock) func(State) State {
	return func(s State) State { s.Players[First] = p; return s }
}

func TestMove(t *testing.T) {
	tests := []struct {
		name        string
		control     Control
		lag         LagPolicy
		setup       func(State) State
		think       int64 // ms from t0 to the move
		reportedLag time.Duration

		wantFlag     bool
		wantDeadline int64 // FlagError.Deadline, ms from t0
		wantMain     int64
		wantPeriods  int
		wantPeriod   int64
		wantInByo    bool
		wantBank     int64
	}{
		// Byo-yomi, 5m + 3 x 30s: the budget is 300s + 90s.
		{name: "move in main time", control: Default(), think: 10 * sec,
			wantMain: 290 * sec, wantPeriods: 3, wantPeriod: 30 * sec},
		{name: "move at zero main time enters byo-yomi with a full period", control: Default(), think: 5 * mins,
			wantMain: 0, wantPeriods: 3, wantPeriod: 30 * sec, wantInByo: true},
		{name: "main time runs out mid-think, move in the first period", control: Default(), think: 5*mins + 20*sec,
			wantPeriods: 3, wantPeriod: 30 * sec, wantInByo: true},
		{name: "move exactly at the end of the first period keeps it", control: Default(), think: 5*mins + 30*sec,
			wantPeriods: 3, wantPeriod: 30 * sec, wantInByo: true},
		{name: "1ms after the end of the first period loses it", control: Default(), think: 5*mins + 30*sec + 1,
			wantPeriods: 2, wantPeriod: 30 * sec, wantInByo: true},
		{name: "one long think consumes several periods", control: Default(), think: 6*mins + 15*sec,
			wantPeriods: 1, wantPeriod: 30 * sec, wantInByo: true},
		{name: "move exactly at the deadline is in time", control: Default(), think: 6*mins + 30*sec,
			wantPeriods: 1, wantPeriod: 30 * sec, wantInByo: true},
		{name: "1ms after the deadline flags", control: Default(), think: 6*mins + 30*sec + 1,
			wantFlag: true, wantDeadline: 6*mins + 30*sec, wantInByo: true},
		{name: "move within a period does not consume it", control: Default(),
			setup: withFirst(PlayerClock{Periods: 3, PeriodMs: 30 * sec, InByoYomi: true}), think: 29*sec + 999,
			wantPeriods: 3, wantPeriod: 30 * sec, wantInByo: true},
		{name: "last period: move at its end is in time", control: Default(),
			setup: withFirst(PlayerClock{Periods: 1, PeriodMs: 30 * sec, InByoYomi: true}), think: 30 * sec,
			wantPeriods: 1, wantPeriod: 30 * sec, wantInByo: true},
		{name: "last period expiring flags", control: Default(),
			setup: withFirst(PlayerClock{Periods: 1, PeriodMs: 30 * sec, InByoYomi: true}), think: 30*sec + 1,
			wantFlag: true, wantDeadline: 30 * sec, wantInByo: true},
		{name: "period cut short by a pause counts from what was left", control: Default(),
			setup: withFirst(PlayerClock{Periods: 2, PeriodMs: 10 * sec, InByoYomi: true}), think: 10*sec + 1,
			wantPeriods: 1, wantPeriod: 30 * sec, wantInByo: true},
		{name: "pure byo-yomi starts in byo-yomi", control: pureByo, think: 30 * sec,
			wantPeriods: 3, wantPeriod: 30 * sec, wantInByo: true},
		{name: "pure byo-yomi loses a period 1ms later", control: pureByo, think: 30*sec + 1,
			wantPeriods: 2, wantPeriod: 30 * sec, wantInByo: true},
		{name: "move at the same instant as the turn start", control: Default(), think: 0,
			wantMain: 5 * mins, wantPeriods: 3, wantPeriod: 30 * sec},

		// Fischer 3m + 2s: the increment comes after the move, the first
		// one included, and never extends the deadline.
		{name: "fischer first move gets the increment after", control: fischer3p2, think: 10 * sec,
			wantMain: 3*mins - 10*sec + 2*sec},
		{name: "fischer move at the deadline then increment", control: fischer3p2, think: 3 * mins,
			wantMain: 2 * sec},
		{name: "fischer increment does not rescue a late move", control: fischer3p2, think: 3*mins + 1,
			wantFlag: true, wantDeadline: 3 * mins},
		{name: "sudden death", control: Control{Kind: Fischer, MainTime: time.Minute}, think: 59 * sec,
			wantMain: sec},

		// No clock never flags.
		{name: "no clock ignores a very long think", control: Control{}, think: 1000 * 60 * mins},

		// Lag compensation with MaxPerMove 1s, BankCap 3s, refill 0.5s.
		{name: "lag credited and bank debited then refilled", control: Default(), lag: lag1s, think: 10 * sec, reportedLag: 800 * time.Millisecond,
			wantMain: 290*sec + 800, wantPeriods: 3, wantPeriod: 30 * sec, wantBank: 3000 - 800 + 500},
		{name: "lag capped at MaxPerMove", control: Default(), lag: lag1s, think: 10 * sec, reportedLag: 5 * time.Second,
			wantMain: 291 * sec, wantPeriods: 3, wantPeriod: 30 * sec, wantBank: 3000 - 1000 + 500},
		{name: "bank never refills above its cap", control: Default(), lag: lag1s, think: 10 * sec, reportedLag: 100 * time.Millisecond,
			wantMain: 290*sec + 100, wantPeriods: 3, wantPeriod: 30 * sec, wantBank: 3000},
		{name: "lag capped by the bank", control: Default(), lag: lag1s,
			setup: withFirst(PlayerClock{MainMs: 5 * mins, Periods: 3, PeriodMs: 30 * sec, LagBankMs: 200}), think: 10 * sec, reportedLag: 800 * time.Millisecond,
			wantMain: 290*sec + 200, wantPeriods: 3, wantPeriod: 30 * sec, wantBank: 500},
		{name: "negative lag counts as zero", control: Default(), lag: lag1s, think: 10 * sec, reportedLag: -time.Second,
			wantMain: 290 * sec, wantPeriods: 3, wantPeriod: 30 * sec, wantBank: 3000},
		{name: "absurd lag counts as zero", control: Default(), lag: lag1s, think: 10 * sec, reportedLag: MaxReportedLag + time.Millisecond,
			wantMain: 290 * sec, wantPeriods: 3, wantPeriod: 30 * sec, wantBank: 3000},
		{name: "lag never makes elapsed time negative", control: Default(), lag: lag1s, think: 300, reportedLag: 800 * time.Millisecond,
			wantMain: 5 * mins, wantPeriods: 3, wantPeriod: 30 * sec, wantBank: 3000},
		{name: "zero policy credits nothing", control: Default(), think: 10 * sec, reportedLag: 800 * time.Millisecond,
			wantMain: 290 * sec, wantPeriods: 3, wantPeriod: 30 * sec},
		{name: "lag rescues a move arriving after the clock reached zero", control: Default(), lag: lag1s, think: 6*mins + 30*sec + 500, reportedLag: 800 * time.Millisecond,
			wantPeriods: 1, wantPeriod: 30 * sec, wantInByo: true, wantBank: 3000 - 800 + 500},
		{name: "lag credit too small to rescue the move", control: Default(), lag: lag1s, think: 6*mins + 30*sec + 500, reportedLag: 400 * time.Millisecond,
			wantFlag: true, wantDeadline: 6*mins + 30*sec + 400, wantInByo: true, wantBank: 3000},
		{name: "lag credit keeps a period", control: Default(), lag: lag1s, think: 5*mins + 30*sec + 300, reportedLag: 300 * time.Millisecond,
			wantPeriods: 3, wantPeriod: 30 * sec, wantInByo: true, wantBank: 3000},
		{name: "lag on a fischer move", control: fischer3p2, lag: lag1s, think: 10 * sec, reportedLag: 250 * time.Millisecond,
			wantMain: 3*mins - 10*sec + 250 + 2*sec, wantBank: 3000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := started(t, tt.control, tt.lag)
			if tt.setup != nil {
				s = tt.setup(s)
			}
			got, err := s.Move(at(tt.think), tt.reportedLag)
			p := got.Players[First]
			if tt.wantFlag {
				var fe *FlagError
				if !errors.As(err, &fe) || !errors.Is(err, ErrFlagged) {
					t.Fatalf("Move error = %v, want a *FlagError wrapping ErrFlagged", err)
				}
				if fe.Side != First || !fe.Deadline.Equal(at(tt.wantDeadline)) || !fe.FlaggedAt.Equal(at(tt.wantDeadline+1)) || !fe.MovedAt.Equal(at(tt.think)) {
					t.Errorf("FlagError = %+v, want deadline %v", fe, at(tt.wantDeadline))
				}
				if got.Phase != Stopped || got.Turn != First || !p.Flagged {
					t.Errorf("after a flag: phase %v, turn %v, flagged %v; want stopped, first, true", got.Phase, got.Turn, p.Flagged)
				}
			} else {
				if err != nil {
					t.Fatalf("Move error = %v", err)
				}
				if got.Phase != Running || got.Turn != Second || got.TurnStartMs != at(tt.think).UnixMilli() {
					t.Errorf("after a move: phase %v, turn %v, start %d; want running, second, %d", got.Phase, got.Turn, got.TurnStartMs, at(tt.think).UnixMilli())
				}
				if got.Players[Second] != s.Players[Second] {
					t.Errorf("opponent's clock changed: %+v -> %+v", s.Players[Second], got.Players[Second])
				}
				if p.Flagged {
					t.Error("flagged without an error")
				}
			}
			want := PlayerClock{MainMs: tt.wantMain, Periods: tt.wantPeriods, PeriodMs: tt.wantPeriod, InByoYomi: tt.wantInByo, Flagged: tt.wantFlag, LagBankMs: tt.wantBank}
			if p != want {
				t.Errorf("mover's clock = %+v, want %+v", p, want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("resulting state is invalid: %v", err)
			}
		})
	}
}

func TestDeadlineAndFlag(t *testing.T) {
	tests := []struct {
		name         string
		control      Control
		lag          LagPolicy
		setup        func(State) State
		wantDeadline int64 // ms from t0
	}{
		{name: "default from the start", control: Default(), wantDeadline: 6*mins + 30*sec},
		{name: "in byo-yomi with a partial period", control: Default(),
			setup: withFirst(PlayerClock{Periods: 2, PeriodMs: 10 * sec, InByoYomi: true}), wantDeadline: 40 * sec},
		{name: "period left at zero", control: Default(),
			setup: withFirst(PlayerClock{Periods: 1, PeriodMs: 0, InByoYomi: true}), wantDeadline: 0},
		{name: "pure byo-yomi", control: pureByo, wantDeadline: 90 * sec},
		{name: "fischer ignores the increment", control: fischer3p2, wantDeadline: 3 * mins},
		{name: "lag grace is the largest possible credit", control: Default(), lag: lag1s, wantDeadline: 6*mins + 30*sec + 1000},
		{name: "lag grace limited by the bank", control: fischer3p2, lag: lag1s,
			setup: withFirst(PlayerClock{MainMs: 10 * sec, LagBankMs: 300}), wantDeadline: 10*sec + 300},
		{name: "empty bank gives no grace", control: fischer3p2, lag: lag1s,
			setup: withFirst(PlayerClock{MainMs: 10 * sec}), wantDeadline: 10 * sec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := started(t, tt.control, tt.lag)
			if tt.setup != nil {
				s = tt.setup(s)
			}
			d, ok := s.Deadline()
			if !ok || !d.Equal(at(tt.wantDeadline)) {
				t.Fatalf("Deadline() = %v, %v; want %v", d, ok, at(tt.wantDeadline))
			}
			if s.Flag(d.Add(-time.Millisecond)) || s.Flag(d) || !s.Flag(d.Add(time.Millisecond)) {
				t.Errorf("Flag around the deadline: %v %v %v; want false false true",
					s.Flag(d.Add(-time.Millisecond)), s.Flag(d), s.Flag(d.Add(time.Millisecond)))
			}
			// Sub-millisecond parts are dropped: still in time within the
			// deadline's millisecond.
			if s.Flag(d.Add(999 * time.Microsecond)) {
				t.Error("flagged within the deadline's millisecond")
			}
			// With the largest credit a move at the deadline is in time,
			// and no report rescues one a millisecond later.
			grace := time.Duration(s.Lag.graceMs(s.Players[First].LagBankMs)) * time.Millisecond
			if _, err := s.Move(d, grace); err != nil {
				t.Errorf("Move at the deadline with lag %v: %v", grace, err)
			}
			if _, err := s.Move(d.Add(time.Millisecond), MaxReportedLag); !errors.Is(err, ErrFlagged) {
				t.Errorf("Move 1ms after the deadline: %v, want ErrFlagged", err)
			}
		})
	}
}

func TestNoClock(t *testing.T) {
	s := started(t, Control{}, lag1s)
	far := at(1 << 40)
	if d, ok := s.Deadline(); ok || !d.IsZero() {
		t.Errorf("Deadline() = %v, %v; want zero, false", d, ok)
	}
	if s.Flag(far) {
		t.Error("no clock flagged")
	}
	if evs := s.Events(t0, far); evs != nil {
		t.Errorf("Events = %v, want none", evs)
	}
	if _, _, ok := s.NextMilestone(t0); ok {
		t.Error("NextMilestone found one")
	}
	next, err := s.Move(far, time.Second)
	if err != nil || next.Turn != Second || next.Players != s.Players {
		t.Errorf("Move = %+v, %v; want the turn switched, clocks untouched", next, err)
	}
	if snap := next.Snapshot(far.Add(time.Hour)); snap.Players != s.Players {
		t.Errorf("Snapshot players = %+v", snap.Players)
	}
}

func TestSnapshot(t *testing.T) {
	tests := []struct {
		name    string
		control Control
		lag     LagPolicy
		now     int64
		want    PlayerClock
	}{
		{"at the start", Default(), LagPolicy{}, 0, PlayerClock{MainMs: 5 * mins, Periods: 3, PeriodMs: 30 * sec}},
		{"before the start (clock stepped back)", Default(), LagPolicy{}, -5 * sec, PlayerClock{MainMs: 5 * mins, Periods: 3, PeriodMs: 30 * sec}},
		{"mid main time", Default(), LagPolicy{}, 61*sec + 1, PlayerClock{MainMs: 4*mins - 1*sec - 1, Periods: 3, PeriodMs: 30 * sec}},
		{"main time exactly spent", Default(), LagPolicy{}, 5 * mins, PlayerClock{Periods: 3, PeriodMs: 30 * sec, InByoYomi: true}},
		{"mid first period", Default(), LagPolicy{}, 5*mins + 12*sec, PlayerClock{Periods: 3, PeriodMs: 18 * sec, InByoYomi: true}},
		{"end of first period", Default(), LagPolicy{}, 5*mins + 30*sec, PlayerClock{Periods: 3, InByoYomi: true}},
		{"second period begins", Default(), LagPolicy{}, 5*mins + 30*sec + 1, PlayerClock{Periods: 2, PeriodMs: 30*sec - 1, InByoYomi: true}},
		{"at the deadline", Default(), LagPolicy{}, 6*mins + 30*sec, PlayerClock{Periods: 1, InByoYomi: true}},
		{"flagged", Default(), LagPolicy{}, 6*mins + 30*sec + 1, PlayerClock{InByoYomi: true, Flagged: true}},
		{"held at zero during the lag grace", Default(), lag1s, 6*mins + 30*sec + 1000, PlayerClock{Periods: 1, InByoYomi: true, LagBankMs: 3000}},
		{"flagged after the lag grace", Default(), lag1s, 6*mins + 30*sec + 1001, PlayerClock{InByoYomi: true, Flagged: true, LagBankMs: 3000}},
		{"fischer", fischer3p2, LagPolicy{}, 2*mins + 59*sec, PlayerClock{MainMs: sec}},
		{"fischer flagged", fischer3p2, LagPolicy{}, 3*mins + 1, PlayerClock{Flagged: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := started(t, tt.control, tt.lag)
			snap := s.Snapshot(at(tt.now))
			if snap.Players[First] != tt.want {
				t.Errorf("Snapshot running side = %+v, want %+v", snap.Players[First], tt.want)
			}
			if snap.Players[Second] != s.Players[Second] || snap.Phase != Running || snap.Turn != First || !snap.At.Equal(at(tt.now)) {
				t.Errorf("Snapshot = %+v", snap)
			}
		})
	}
}

func TestStopAndResume(t *testing.T) {
	s := started(t, Default(), LagPolicy{})
	stopped := s.Stop(at(5*mins + 45*sec))
	want := PlayerClock{Periods: 2, PeriodMs: 15 * sec, InByoYomi: true}
	if stopped.Phase != Stopped || stopped.Turn != First || stopped.Players[First] != want || stopped.Players[Second] != s.Players[Second] {
		t.Fatalf("Stop = %+v, want First at %+v", stopped, want)
	}
	// The final values stay put, whatever the time.
	if snap := stopped.Snapshot(at(100 * mins)); snap.Players != stopped.Players || snap.Phase != Stopped {
		t.Errorf("Snapshot of a stopped clock = %+v", snap)
	}
	if stopped.Flag(at(100*mins)) || stopped.Events(t0, at(100*mins)) != nil {
		t.Error("a stopped clock flags or has events")
	}
	if _, ok := stopped.Deadline(); ok {
		t.Error("a stopped clock has a deadline")
	}
	if _, err := stopped.Move(at(100*mins), 0); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Move on a stopped clock: %v, want ErrNotRunning", err)
	}
	if again := stopped.Stop(at(200 * mins)); again != stopped {
		t.Error("Stop is not idempotent")
	}
	// Resuming continues the period that was cut short.
	resumed, err := stopped.Start(at(10*mins), First)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := resumed.Deadline(); !d.Equal(at(10*mins + 15*sec + 30*sec)) {
		t.Errorf("Deadline after resume = %v", d)
	}
	if err := stopped.Validate(); err != nil {
		t.Error(err)
	}
}

// TestYield: a turn handed back without a move (an undo) is charged like
// a move, its byo-yomi period reset, but earns no increment, uses no lag
// credit and leaves the lag bank alone; the other side's clock starts.
func TestYield(t *testing.T) {
	s := started(t, Default(), lag1s)
	s.Players[First].LagBankMs = sec
	y, err := s.Yield(at(5*mins + 25*sec)) // 25 s into the first period
	if err != nil {
		t.Fatal(err)
	}
	want := PlayerClock{Periods: 3, PeriodMs: 30 * sec, InByoYomi: true, LagBankMs: sec}
	if y.Players[First] != want || y.Phase != Running || y.Turn != Second || y.TurnStartMs != unixMs(at(5*mins+25*sec)) {
		t.Fatalf("Yield 25 s into byo-yomi = %+v, want First at %+v and Second running", y, want)
	}
	// Two periods run out: they are lost, as for a move.
	y, err = started(t, Default(), LagPolicy{}).Yield(at(5*mins + 70*sec))
	if err != nil || y.Players[First] != (PlayerClock{Periods: 1, PeriodMs: 30 * sec, InByoYomi: true}) {
		t.Fatalf("Yield 70 s into byo-yomi = %+v, %v", y.Players[First], err)
	}
	f, err := started(t, fischer3p2, LagPolicy{}).Yield(at(10 * sec))
	if err != nil || f.Players[First].MainMs != 3*mins-10*sec {
		t.Fatalf("Fischer Yield after 10 s: main %d ms, %v; want no increment", f.Players[First].MainMs, err)
	}
	// Out of time, even within a move's lag grace: a yield has no lag.
	if _, err := started(t, fischer3p2, lag1s).Yield(at(3*mins + 500)); !errors.Is(err, ErrFlagged) {
		t.Fatalf("Yield after the budget: %v, want ErrFlagged", err)
	}
	if _, err := s.Stop(at(sec)).Yield(at(2 * sec)); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Yield of a stopped clock: %v, want ErrNotRunning", err)
	}
}

// TestTakeBack: moves taken back give back the increments they earned,
// so a move and its undo leave the clock as the turn left it.
func TestTakeBack(t *testing.T) {
	s := started(t, fischer3p2, LagPolicy{})
	// First moves after 10 s (+2 s), Second after 20 s (+2 s); First's turn
	// has run 5 s.
	s, err := s.Move(at(10*sec), 0)
	if err != nil {
		t.Fatal(err)
	}
	if s, err = s.Move(at(30*sec), 0); err != nil {
		t.Fatal(err)
	}
	inc := 2 * time.Second
	b, ok := s.TakeBack(at(35*sec), mains(inc, inc))
	if !ok || b.Players[First].MainMs != 3*mins-10*sec || b.Players[Second].MainMs != 3*mins-20*sec {
		t.Fatalf("TakeBack of one move each = %+v, %v; want 2:50 and 2:40 left", b.Players, ok)
	}
	if b.Phase != Running || b.Turn != First || b.TurnStartMs != s.TurnStartMs {
		t.Fatalf("TakeBack changed the running turn: %+v", b)
	}
	if d, _ := b.Deadline(); !d.Equal(at(30*sec + 3*mins - 10*sec)) {
		t.Fatalf("deadline after TakeBack %v, want 2:50 after the turn began", d)
	}
	// The running side past its budget without the increment: refused.
	if got, ok := s.TakeBack(at(30*sec+3*mins-10*sec+1), mains(inc, 0)); ok || got != s {
		t.Fatalf("TakeBack leaving the running side no time = %+v, %v; want it refused, unchanged", got, ok)
	}
	if _, ok := s.TakeBack(at(30*sec+3*mins-10*sec), mains(inc, 0)); !ok {
		t.Fatal("TakeBack at the last in-time instant refused")
	}
	// The waiting side's main time gone: refused too.
	if _, ok := s.TakeBack(at(sec), mains(0, 3*time.Minute)); ok {
		t.Fatal("TakeBack of all the waiting side's time accepted")
	}
	if _, ok := s.TakeBack(at(sec), mains(0, s.Players[Second].Main())); ok {
		t.Fatal("TakeBack of exactly the waiting side's main time accepted")
	}
	if got, ok := s.TakeBack(at(sec), [2]Earned{}); !ok || got != s {
		t.Fatalf("TakeBack of nothing = %+v, %v", got, ok)
	}
	if _, ok := s.TakeBack(at(sec), mains(-inc, 0)); ok {
		t.Fatal("TakeBack of a negative amount accepted")
	}
}

// TestTakeBackOfAByoYomiMove: a move in byo-yomi fills its period again and
// refills the lag bank; taken back, its mover goes on with the period as the
// move found it and the bank as the move left it before its refill, so a
// player cannot think on one position for ever by moving and undoing.
func TestTakeBackOfAByoYomiMove(t *testing.T) {
	s := started(t, pureByo, lag1s)
	// First spends 40 s (a whole period and 10 s of the next) and reports
	// 400 ms of lag: charged 39.6 s, 20.4 s left in its second period; its
	// full bank (3 s) lends 400 ms and gets back 400 of its 500 ms refill.
	moved, earned, err := s.MoveEarning(at(40*sec), 400*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	want := Earned{PeriodMs: 30*sec - 20_400, LagMs: 400}
	if earned != want {
		t.Fatalf("the move earned %+v, want %+v", earned, want)
	}
	if p := moved.Players[First]; p.Periods != 2 || p.PeriodMs != 30*sec || p.LagBankMs != 3*sec {
		t.Fatalf("First after its move = %+v, want 2 periods, a full one, 3 s banked", p)
	}
	// Second moves back at once (its own refill withdrawn alike), and the
	// undo of both comes 5 s into First's turn.
	moved, second, err := moved.MoveEarning(at(40*sec+100), 0)
	if err != nil {
		t.Fatal(err)
	}
	back, ok := moved.TakeBack(at(45*sec+100), [2]Earned{earned, second})
	if !ok {
		t.Fatal("TakeBack refused")
	}
	if p := back.Players[First]; p.Periods != 2 || p.PeriodMs != 20_400 || p.LagBankMs != 2600 {
		t.Fatalf("First after the take-back = %+v, want 2 periods, 20.4 s left in the current one, 2.6 s banked", p)
	}
	if p := back.Players[Second]; p.Periods != 3 || p.PeriodMs != 30*sec-100 {
		t.Fatalf("Second after the take-back = %+v, want its period as its move left it", p)
	}
	// First's turn, begun at Second's move, runs on what was left: its
	// second period runs out 20.4 s in, its last 30 s later.
	if d, _ := back.Deadline(); !d.Equal(at(40*sec + 100 + 20_400 + 30*sec + 1000)) {
		t.Fatalf("deadline after TakeBack %v, want 50.4 s and the lag grace after the turn began", d)
	}
	// Out of time without the period filled again: refused, unchanged.
	late := at(40*sec + 100 + 20_400 + 30*sec + 1)
	if got, ok := moved.TakeBack(late, [2]Earned{earned, second}); ok || got != moved {
		t.Fatalf("TakeBack past the budget it leaves = %+v, %v; want it refused", got, ok)
	}
	if _, ok := moved.TakeBack(late, [2]Earned{{}, second}); !ok {
		t.Fatal("TakeBack of Second's move alone refused, First's period untouched")
	}
}

// TestTakeBackSpillsIntoTheNextPeriod: two moves taken back one after the
// other (two undos in a row). First, under 3 x 30 s, moved with 10 s left in
// its period, then thought 25 s on its next move. Withdrawing both refills
// leaves it 10 s - 25 s of its first period: one period used and 15 s left
// in the next, far from out of time (TakeBack once refused it, the period
// below zero).
func TestTakeBackSpillsIntoTheNextPeriod(t *testing.T) {
	s := started(t, pureByo, LagPolicy{})
	s, a1, err := s.MoveEarning(at(20*sec), 0) // First: 20 s, 10 s left
	if err != nil {
		t.Fatal(err)
	}
	s, b1, _ := s.MoveEarning(at(20*sec), 0)
	s, a2, _ := s.MoveEarning(at(45*sec), 0) // First: 25 s, 5 s left
	s, b2, _ := s.MoveEarning(at(45*sec), 0)
	s, ok := s.TakeBack(at(45*sec), [2]Earned{a2, b2})
	if !ok {
		t.Fatal("first TakeBack refused")
	}
	back, ok := s.TakeBack(at(45*sec), [2]Earned{a1, b1})
	if !ok {
		t.Fatalf("second TakeBack refused; First has %+v (budget %v from its turn start), not out of time",
			s.Players[First], time.Duration(rulesOf(s.Control).budget(s.Players[First]))*time.Millisecond)
	}
	if p := back.Players[First]; p.Periods != 2 || p.PeriodMs != 15*sec {
		t.Fatalf("First after both take-backs = %+v; want 2 periods, 15 s left in the current one", p)
	}
}

// mains is what moves earned in Fischer increments, a and b.
func mains(a, b time.Duration) [2]Earned {
	return [2]Earned{{MainMs: a.Milliseconds()}, {MainMs: b.Milliseconds()}}
}

func TestStopAfterFlag(t *testing.T) {
	s := started(t, fischer3p2, LagPolicy{})
	stopped := s.Stop(at(3*mins + 1))
	if p := stopped.Players[First]; !p.Flagged || p.MainMs != 0 {
		t.Fatalf("Stop after the deadline: %+v, want flagged", p)
	}
	if _, err := stopped.Start(at(4*mins), Second); !errors.Is(err, ErrFlagged) {
		t.Errorf("Start after a flag: %v, want ErrFlagged", err)
	}
	// Stopping at the deadline itself is in time.
	if p := s.Stop(at(3 * mins)).Players[First]; p.Flagged || p.MainMs != 0 {
		t.Errorf("Stop at the deadline: %+v", p)
	}
	if err := stopped.Validate(); err != nil {
		t.Error(err)
	}
}

func TestStartErrors(t *testing.T) {
	s := New(Default())
	if s.Phase != Idle {
		t.Fatalf("New phase = %v", s.Phase)
	}
	if _, err := s.Move(t0, 0); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Move before Start: %v", err)
	}
	if _, err := s.Start(t0, 2); !errors.Is(err, ErrInvalidState) {
		t.Errorf("Start(side 2): %v", err)
	}
	r, err := s.Start(t0, Second)
	if err != nil || r.Turn != Second || r.TurnStartMs != t0.UnixMilli() {
		t.Fatalf("Start(Second) = %+v, %v", r, err)
	}
	if _, err := r.Start(t0, First); !errors.Is(err, ErrRunning) {
		t.Errorf("Start while running: %v", err)
	}
}

func TestAlternatingGame(t *testing.T) {
	// Both sides alternate; each keeps its own clock.
	s := started(t, fischer3p2, LagPolicy{})
	var err error
	for i, ms := range []int64{5 * sec, 7 * sec, 9 * sec, 11 * sec} {
		if s, err = s.Move(at(ms), 0); err != nil {
			t.Fatalf("move %d: %v", i, err)
		}
	}
	// First thought 5s then 2s, Second 2s twice, each plus the increment.
	if got, want := s.Players[First].MainMs, 3*mins-5*sec+2*sec-2*sec+2*sec; got != want {
		t.Errorf("First main = %d, want %d", got, want)
	}
	if got, want := s.Players[Second].MainMs, 3*mins-2*sec+2*sec-2*sec+2*sec; got != want {
		t.Errorf("Second main = %d, want %d", got, want)
	}
	if s.Turn != First || s.TurnStartMs != at(11*sec).UnixMilli() {
		t.Errorf("turn %v from %d", s.Turn, s.TurnStartMs)
	}
}

func TestClockSteppingBack(t *testing.T) {
	s := started(t, Default(), LagPolicy{})
	next, err := s.Move(at(-10*sec), 0)
	if err != nil {
		t.Fatal(err)
	}
	if next.Players[First].MainMs != 5*mins || next.TurnStartMs != t0.UnixMilli() {
		t.Errorf("move before the turn start: %+v; want nothing charged and the start kept", next)
	}
}

func TestSubMillisecondFloors(t *testing.T) {
	s := started(t, fischer3p2, LagPolicy{})
	if _, err := s.Move(at(3*mins).Add(999*time.Microsecond), 0); err != nil {
		t.Errorf("move within the deadline's millisecond: %v", err)
	}
	// Before 1970 too: flooring, not truncation towards zero.
	old := time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)
	s2, _ := New(fischer3p2).Start(old, First)
	if s2.Flag(old.Add(3*time.Minute + 999*time.Microsecond)) {
		t.Error("flagged within the deadline's millisecond before 1970")
	}
	if !s2.Flag(old.Add(3*time.Minute + time.Millisecond)) {
		t.Error("not flagged 1ms after the deadline before 1970")
	}
}

func TestStateJSON(t *testing.T) {
	s := started(t, Default(), lag1s)
	s, _ = s.Move(at(5*mins+40*sec), 500*time.Millisecond)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"control":{"kind":"byoyomi","main_ms":300000,"periods":3,"period_ms":30000},` +
		`"lag":{"max_per_move_ms":1000,"bank_cap_ms":3000,"refill_per_move_ms":500},"phase":"running","turn":1,"turn_start_ms":1740830740000,` +
		`"players":[{"main_ms":0,"periods":2,"period_ms":30000,"in_byoyomi":true,"lag_bank_ms":3000},` +
		`{"main_ms":300000,"periods":3,"period_ms":30000,"lag_bank_ms":3000}]}`
	if string(b) != want {
		t.Errorf("JSON =\n%s\nwant\n%s", b, want)
	}
	var back State
	if err := json.Unmarshal(b, &back); err != nil || back != s {
		t.Errorf("round trip = %+v, %v; want %+v", back, err, s)
	}
	// No lag policy: the field is omitted.
	if b, _ := json.Marshal(New(Control{})); strings.Contains(string(b), "lag") {
		t.Errorf("zero lag policy encoded: %s", b)
	}
}

func TestStateValidate(t *testing.T) {
	good := started(t, Default(), lag1s)
	tests := []struct {
		name     string
		mutate   func(*State)
		wantErrs []string
	}{
		{"valid", func(*State) {}, nil},
		{"bad control and policy", func(s *State) {
			s.Control.Periods = 0
			s.Lag.MaxPerMove = -1
		}, []string{"1 to 100 periods", "max per move -1ns is negative", "first: 3 periods outside 0..0", "second: 3 periods outside 0..0"}},
		{"bad phase and turn", func(s *State) { s.Phase, s.Turn = 5, 3 }, []string{"unknown phase(5)", "turn is side(3)"}},
		{"byo-yomi values out of range", func(s *State) {
			s.Players[First] = PlayerClock{MainMs: 6 * mins, Periods: 4, PeriodMs: 31 * sec, InByoYomi: true, LagBankMs: 4000}
		}, []string{"lag bank 4000ms", "main time 360000ms", "4 periods", "period 31000ms", "period 31000ms is not full", "in_byoyomi true"}},
		{"flagged while running", func(s *State) {
			s.Players[Second] = PlayerClock{InByoYomi: true, Flagged: true}
		}, []string{"flagged in a running game"}},
		{"no periods but not flagged", func(s *State) {
			s.Phase = Stopped
			s.Players[Second] = PlayerClock{InByoYomi: true}
		}, []string{"flagged false with 0 periods"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good
			tt.mutate(&s)
			err := s.Validate()
			if got := len(joined(err)); got != len(tt.wantErrs) {
				t.Fatalf("Validate() = %v; want %d problems", err, len(tt.wantErrs))
			}
			for _, want := range tt.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate() = %v; missing %q", err, want)
				}
			}
		})
	}
	fischer := started(t, fischer3p2, LagPolicy{})
	fischer.Players[First] = PlayerClock{MainMs: -1, Periods: 1, Flagged: true}
	fischer.Phase = Stopped
	if got := len(joined(fischer.Validate())); got != 3 {
		t.Errorf("Fischer Validate() = %v; want 3 problems", fischer.Validate())
	}
	none := started(t, Control{}, LagPolicy{})
	none.Players[Second].MainMs = 1
	if got := len(joined(none.Validate())); got != 1 {
		t.Errorf("None Validate() = %v; want 1 problem", none.Validate())
	}
}

// TestCreditIsWhatAMoveIsNotCharged: the credit Credit tells is the time
// Move leaves uncharged, within the bank and the time elapsed.
func TestCreditIsWhatAMoveIsNotCharged(t *testing.T) {
	ctl := Control{Kind: ByoYomi, MainTime: 10 * time.Second, Periods: 1, PeriodTime: 5 * time.Second}
	lag := LagPolicy{MaxPerMove: time.Second, BankCap: 5 * time.Second, RefillPerMove: 500 * time.Millisecond}
	t0 := time.UnixMilli(1_700_000_000_000)
	s, err := New(ctl).WithLag(lag).Start(t0, First)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		after, lag, want time.Duration
	}{
		{3 * time.Second, 400 * time.Millisecond, 400 * time.Millisecond},
		{3 * time.Second, 2 * time.Second, time.Second},               // MaxPerMove
		{300 * time.Millisecond, time.Second, 300 * time.Millisecond}, // the time elapsed
		{3 * time.Second, -time.Second, 0},
		{3 * time.Second, 2 * MaxReportedLag, 0},
	} {
		now := t0.Add(c.after)
		if got := s.Credit(now, c.lag); got != c.want {
			t.Errorf("credit after %v reporting %v: %v, want %v", c.after, c.lag, got, c.want)
		}
		next, err := s.Move(now, c.lag)
		if err != nil {
			t.Fatal(err)
		}
		charged := time.Duration(s.Players[First].MainMs-next.Players[First].MainMs) * time.Millisecond
		if charged != c.after-c.want {
			t.Errorf("after %v reporting %v: charged %v, want %v", c.after, c.lag, charged, c.after-c.want)
		}
	}
	if got := New(ctl).WithLag(lag).Credit(t0, time.Second); got != 0 {
		t.Errorf("credit with no clock running: %v, want 0", got)
	}
}
