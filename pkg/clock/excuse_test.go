package clock

import (
	"errors"
	"testing"
	"time"
)

// TestExcuse: time excused is not charged; every deadline and milestone of
// the turn moves later by it; the largest total counts, never more than
// the turn so far; the next turn starts with nothing excused.
func TestExcuse(t *testing.T) {
	// 10s main time, then 3 x 5s: the budget is 25s.
	c := Control{Kind: ByoYomi, MainTime: 10 * time.Second, Periods: 3, PeriodTime: 5 * time.Second}
	s := started(t, c, LagPolicy{})
	ex := s.Excuse(4*time.Second, at(6*sec))
	if ex.ExcusedMs != 4*sec {
		t.Fatalf("ExcusedMs = %d, want %d", ex.ExcusedMs, 4*sec)
	}
	if got := ex.Snapshot(at(6 * sec)).Players[First].MainMs; got != 8*sec {
		t.Errorf("main time shown after 6s with 4s excused = %dms, want 8s", got)
	}
	if d, _ := ex.Deadline(); !d.Equal(at(29 * sec)) {
		t.Errorf("Deadline = %v, want t0+29s", d.Sub(t0))
	}
	if ex.Flag(at(29*sec)) || !ex.Flag(at(29*sec+1)) {
		t.Error("the flag does not fall one millisecond after the moved deadline")
	}
	if ex.OutOfBudget(at(29*sec)) || !ex.OutOfBudget(at(29*sec+1)) {
		t.Error("the budget does not run out at the moved deadline")
	}
	if m, k, _ := ex.NextMilestone(at(6 * sec)); k != EnteredByoYomi || !m.Equal(at(14*sec)) {
		t.Errorf("NextMilestone = %v at t0+%v, want entered_byoyomi at t0+14s", k, m.Sub(t0))
	}
	if evs := ex.Events(t0, at(14*sec-1)); len(evs) != 0 {
		t.Errorf("milestones before the moved one: %v", evs)
	}

	// Idempotent: a smaller or equal total changes nothing, a larger one
	// counts, and never more than the turn has lasted.
	if again := ex.Excuse(3*time.Second, at(7*sec)); again != ex {
		t.Errorf("a smaller total changed the clock: %+v", again)
	}
	if more := ex.Excuse(5*time.Second, at(7*sec)); more.ExcusedMs != 5*sec {
		t.Errorf("a larger total: ExcusedMs = %d, want %d", more.ExcusedMs, 5*sec)
	}
	if capped := s.Excuse(time.Hour, at(6*sec)); capped.ExcusedMs != 6*sec || capped.Snapshot(at(6 * sec)).Players[First].MainMs != 10*sec {
		t.Errorf("excusing more than the turn: %+v", capped)
	}
	if neg := s.Excuse(-time.Second, at(6*sec)); neg != s {
		t.Errorf("a negative total changed the clock: %+v", neg)
	}

	// A move is charged the time not excused, and the next turn starts
	// with nothing excused.
	moved, err := ex.Move(at(8*sec), 0)
	if err != nil {
		t.Fatal(err)
	}
	if moved.Players[First].MainMs != 6*sec || moved.ExcusedMs != 0 || moved.TurnStartMs != at(8*sec).UnixMilli() {
		t.Errorf("after the move: %+v, want First at 6s, nothing excused, Second from t0+8s", moved)
	}
	if err := moved.Validate(); err != nil {
		t.Error(err)
	}
	// Late even with the excuse: the flag names the moved deadline.
	_, err = ex.Move(at(30*sec), 0)
	var fe *FlagError
	if !errors.As(err, &fe) || !fe.Deadline.Equal(at(29*sec)) {
		t.Errorf("a late move: %v, want a flag at the deadline t0+29s", err)
	}
	if stopped := ex.Stop(at(8 * sec)); stopped.ExcusedMs != 0 || stopped.Players[First].MainMs != 6*sec {
		t.Errorf("Stop: %+v, want First at 6s and nothing excused", stopped)
	}
	if y, err := ex.Yield(at(8 * sec)); err != nil || y.ExcusedMs != 0 || y.Players[First].MainMs != 6*sec {
		t.Errorf("Yield: %+v, %v", y, err)
	}

	// Nothing runs, nothing is excused.
	if idle := New(c).Excuse(time.Second, at(sec)); idle.ExcusedMs != 0 {
		t.Errorf("an idle clock was excused: %+v", idle)
	}
}

func TestExcuseValidate(t *testing.T) {
	s := started(t, Default(), LagPolicy{})
	if err := s.Excuse(time.Second, at(2*sec)).Validate(); err != nil {
		t.Errorf("a running clock with time excused: %v", err)
	}
	bad := s.Stop(at(2 * sec))
	bad.ExcusedMs = 1000
	if err := bad.Validate(); !errors.Is(err, ErrInvalidState) {
		t.Errorf("time excused in a stopped game: %v, want ErrInvalidState", err)
	}
	bad = s
	bad.ExcusedMs = -1
	if err := bad.Validate(); !errors.Is(err, ErrInvalidState) {
		t.Errorf("a negative excuse: %v, want ErrInvalidState", err)
	}
}
