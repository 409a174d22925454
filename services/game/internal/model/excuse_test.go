package model

import (
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/clock"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/pkg/rulespb"
)

// clockKinds lists the kinds of the clock events in evs.
func clockKinds(evs []*gamev1.Event) []gamev1.ClockEventKind {
	var out []gamev1.ClockEventKind
	for _, e := range evs {
		if c := e.GetClock(); c != nil {
			out = append(out, c.GetKind())
		}
	}
	return out
}

// TestExcuseMovesTheTurnsWakeUps: an outage excused after byo-yomi was
// announced moves the next milestone later by the outage, and announces
// nothing twice; excusing the same outage again changes nothing.
func TestExcuseMovesTheTurnsWakeUps(t *testing.T) {
	st, start := clocked(t)
	// Red's main time, then 30 s periods.
	entered := start.Add(time.Duration(st.Clock.Players[rules.First].MainMs) * time.Millisecond)
	ch, applied, err := Expire(st, st.WakeMs, entered)
	if err != nil || !applied || len(clockKinds(ch.Events)) != 1 || clockKinds(ch.Events)[0] != gamev1.ClockEventKind_CLOCK_EVENT_KIND_BYO_YOMI_ENTERED {
		t.Fatalf("byo-yomi: %v %v %v", applied, err, ch.Events)
	}
	st = ch.State
	Seal(ch, st.Version, entered)

	outage := 20 * time.Second
	now := entered.Add(25 * time.Second)
	ex, ok := Excuse(st, outage, now)
	if !ok || len(ex.Events) != 1 {
		t.Fatalf("Excuse: %v, %v", ok, ex.Events)
	}
	c := ex.Events[0].GetClock()
	if c.GetKind() != gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED || c.GetExcused().AsDuration() != outage || c.GetSide() != 1 {
		t.Fatalf("the excuse's event: %v", c)
	}
	// 25 s into the first period, 20 s of them excused.
	if left := c.GetClocks().GetFirst().GetPeriodLeft().AsDuration(); left != 25*time.Second {
		t.Errorf("Red's period shows %v left, want 25s", left)
	}
	periodUsed := entered.Add(30*time.Second + outage + time.Millisecond)
	if ex.State.WakeMs != periodUsed.UnixMilli() {
		t.Fatalf("the next wake-up is at %v, want the end of the first period moved by the outage, %v", time.UnixMilli(ex.State.WakeMs), periodUsed)
	}
	if again, ok := Excuse(ex.State, outage, now.Add(time.Second)); ok {
		t.Fatalf("the same outage excused twice: %v", again.Events)
	}
	ch, applied, err = Expire(ex.State, ex.State.WakeMs, periodUsed)
	if err != nil || !applied {
		t.Fatalf("the moved wake-up: %v %v", applied, err)
	}
	if kinds := clockKinds(ch.Events); len(kinds) != 1 || kinds[0] != gamev1.ClockEventKind_CLOCK_EVENT_KIND_PERIOD_USED {
		t.Fatalf("the moved wake-up announced %v, want one period used and nothing again", kinds)
	}
	if ch.State.Status != StatusOngoing {
		t.Fatalf("the game ended: %v", ch.State.Result)
	}

	// A move is charged what was not excused, and ends the excuse.
	moved := must(t, "move")(Move(ex.State, rules.First, "h1g3", 0, now))
	if moved.Clock.ExcusedMs != 0 || moved.Clock.Players[rules.First].Periods != 3 {
		t.Fatalf("after the move: %+v", moved.Clock)
	}
}

func TestNothingToExcuse(t *testing.T) {
	st, now := clocked(t)
	if _, ok := Excuse(st, 0, now.Add(time.Second)); ok {
		t.Error("nothing excused made a change")
	}
	ended := must(t, "resign")(Resign(st, rules.First, now))
	if _, ok := Excuse(ended, time.Second, now.Add(time.Second)); ok {
		t.Error("an ended game was excused")
	}
	untimed, err := Create(CreateParams{ID: "u", Variant: rules.Xiangqi, Seats: [2]Seat{{PlayerID: "a"}, {PlayerID: "b"}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := Excuse(untimed.State, time.Second, now.Add(time.Second)); ok {
		t.Error("an untimed game was excused")
	}
}

// TestAMilestoneIsNotAnnouncedAgainAfterALongerExcuse: one process excused
// an outage, and byo-yomi was announced on time after it; another, whose
// pings saw the same outage half a second longer, excuses that too. Its
// excuse moves byo-yomi past now, but it is not announced again.
func TestAMilestoneIsNotAnnouncedAgainAfterALongerExcuse(t *testing.T) {
	st, _, _ := afterALongerExcuse(t)
	ch, applied, err := Expire(st, st.WakeMs, time.UnixMilli(st.WakeMs))
	if err != nil || !applied {
		t.Fatalf("the next wake-up: %v %v", applied, err)
	}
	if kinds := clockKinds(ch.Events); len(kinds) != 1 || kinds[0] != gamev1.ClockEventKind_CLOCK_EVENT_KIND_PERIOD_USED {
		t.Fatalf("the next wake-up announced %v, want the first period used only", kinds)
	}
}

// afterALongerExcuse builds the state of two processes excusing one outage
// differently: Red's byo-yomi was announced after the first excuse, then a
// second process excused more of the same outage, which moved
// ClockEventsMs past now. It returns the
// state, now, and the instant byo-yomi was announced at.
func afterALongerExcuse(t *testing.T) (st *State, now, entered time.Time) {
	t.Helper()
	st, start := clocked(t)
	back := start.Add(20 * time.Second)
	ex, ok := Excuse(st, 10*time.Second, back)
	if !ok {
		t.Fatal("the first excuse")
	}
	Seal(ex, st.Version, back)
	st = ex.State
	entered = time.UnixMilli(st.WakeMs)
	ch, applied, err := Expire(st, st.WakeMs, entered)
	if err != nil || !applied || clockKinds(ch.Events)[0] != gamev1.ClockEventKind_CLOCK_EVENT_KIND_BYO_YOMI_ENTERED {
		t.Fatalf("byo-yomi: %v %v %v", applied, err, ch.Events)
	}
	Seal(ch, st.Version, entered)
	st = ch.State
	now = entered.Add(100 * time.Millisecond)
	if ex, ok = Excuse(st, 10500*time.Millisecond, now); !ok {
		t.Fatal("the longer excuse")
	}
	Seal(ex, st.Version, now)
	if ex.State.ClockEventsMs <= ms(now) {
		t.Fatalf("ClockEventsMs %d is not past now %d: the case is not built", ex.State.ClockEventsMs, ms(now))
	}
	return ex.State, now, entered
}

// excusedOnce excuses st total at at, and wants one OUTAGE_EXCUSED event
// giving side all of it.
func excusedOnce(t *testing.T, st *State, total time.Duration, at time.Time, side rules.Side) (Change, *gamev1.ClockEvent) {
	t.Helper()
	ex, ok := Excuse(st, total, at)
	if !ok || len(ex.Events) != 1 {
		t.Fatalf("Excuse: %v, %v", ok, ex.Events)
	}
	c := ex.Events[0].GetClock()
	if c.GetKind() != gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED || c.GetSide() != rulespb.Side(side) || c.GetExcused().AsDuration() != total {
		t.Fatalf("the excuse's event: %v; want %v excused %v", c, side, total)
	}
	return ex, c
}

// TestAnOutageDuringSetupMovesTheFormationsDeadline: time in which nobody
// could choose is not counted against the side choosing its formation;
// the next side's choice starts with nothing excused.
func TestAnOutageDuringSetupMovesTheFormationsDeadline(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ch, err := Create(CreateParams{ID: "j", Variant: rules.Janggi, SetupTime: time.Minute}, now)
	if err != nil {
		t.Fatal(err)
	}
	st := ch.State
	deadline := now.Add(time.Minute)

	// 50 s in, with 20 s of them an outage: Han has until 80 s.
	at := now.Add(50 * time.Second)
	ex, c := excusedOnce(t, st, 20*time.Second, at, rules.Second)
	moved := deadline.Add(20 * time.Second)
	if !c.GetSetupDeadline().AsTime().Equal(moved) || c.GetClocks() != nil {
		t.Fatalf("the excuse's event: %v", c)
	}
	if got := View(ex.State, nil, at).GetSetupDeadline().AsTime(); !got.Equal(moved) {
		t.Errorf("a read shows the setup deadline at %v, want %v", got, moved)
	}
	if want := moved.UnixMilli() + 1; ex.State.WakeMs != want {
		t.Errorf("the wake-up is at %d, want %d", ex.State.WakeMs, want)
	}
	if _, ok := Excuse(ex.State, 20*time.Second, at.Add(time.Second)); ok {
		t.Fatal("the same outage excused twice")
	}
	st = ex.State
	Seal(ex, st.Version, at)

	// The old deadline passes: Han may still choose, and nothing is due.
	late := deadline.Add(10 * time.Second)
	if _, applied, err := Expire(st, deadline.UnixMilli()+1, late); applied || err != nil {
		t.Fatalf("the old deadline applied a default: %v %v", applied, err)
	}
	ch, err = ChooseFormation(st, rules.Second, rules.SangMaSangMa, late)
	if err != nil || ch.Reply != nil {
		t.Fatalf("Han's choice after the old deadline: %v %v", err, ch.Reply)
	}
	st = ch.State
	if st.WaitExcusedMs != 0 {
		t.Fatalf("Cho's choice starts with %d ms excused", st.WaitExcusedMs)
	}
	// Cho's minute is Cho's own: excusing more than it has lasted gives
	// only what it has lasted.
	ex, ok := Excuse(st, time.Minute, late.Add(5*time.Second))
	if !ok || ex.Events[0].GetClock().GetExcused().AsDuration() != 5*time.Second {
		t.Fatalf("Cho's excuse: %v, %v", ok, ex.Events)
	}
	if got, want := time.UnixMilli(ex.State.WakeMs), late.Add(time.Minute+5*time.Second+time.Millisecond); !got.Equal(want) {
		t.Fatalf("Cho's wake-up is at %v, want %v", got, want)
	}
	// Past the moved deadline, the default is set as before.
	due := time.UnixMilli(ex.State.WakeMs)
	Seal(ex, ex.State.Version, late.Add(5*time.Second))
	ch, applied, err := Expire(ex.State, ex.State.WakeMs, due)
	if err != nil || !applied || ch.State.Status != StatusOngoing || ch.State.Formations[rules.First] != rules.MaSangSangMa {
		t.Fatalf("the moved deadline: %v %v %+v", applied, err, ch.State)
	}
}

// TestAnOutageBeforeTheFirstMoveDoesNotAbortTheGame: the wait for a first
// move is excused like a turn, and ends with the move.
func TestAnOutageBeforeTheFirstMoveDoesNotAbortTheGame(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ctl := clock.Default()
	ch, err := Create(CreateParams{ID: "x", Variant: rules.Xiangqi, Control: &ctl, Lag: serviceLag, FirstMoveTime: 30 * time.Second,
		Seats: [2]Seat{{PlayerID: "a"}, {PlayerID: "b"}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	st := ch.State
	deadline := now.Add(30 * time.Second)
	at := now.Add(25 * time.Second)
	ex, c := excusedOnce(t, st, 10*time.Second, at, rules.First)
	moved := deadline.Add(10 * time.Second)
	if c.GetSetupDeadline() != nil || !c.GetClocks().GetFirstMoveDeadline().AsTime().Equal(moved) {
		t.Fatalf("the excuse's event: %v", c)
	}
	st = ex.State
	Seal(ex, st.Version, at)
	if _, applied, err := Expire(st, deadline.UnixMilli()+1, deadline.Add(time.Second)); applied || err != nil {
		t.Fatalf("the old deadline aborted the game: %v %v", applied, err)
	}
	ch, err = Move(st, rules.First, "h3e3", 0, deadline.Add(5*time.Second))
	if err != nil || ch.Reply != nil || ch.State.Status != StatusOngoing {
		t.Fatalf("the first move after the old deadline: %v %v", err, ch.Reply)
	}
	st = ch.State
	// Black's wait is its own: 30 s from Red's move, nothing excused.
	if st.WaitExcusedMs != 0 {
		t.Fatalf("Black's wait starts with %d ms excused", st.WaitExcusedMs)
	}
	if got, want := time.UnixMilli(firstMoveDeadline(st)), deadline.Add(35*time.Second); !got.Equal(want) {
		t.Fatalf("Black's first move is due by %v, want %v", got, want)
	}
	ch, applied, err := Expire(st, st.WakeMs, time.UnixMilli(st.WakeMs))
	if err != nil || !applied || ch.State.Status != StatusAborted {
		t.Fatalf("Black's missed first move: %v %v %v", applied, err, ch.State.Status)
	}
}

// TestNothingToExcuseWhenNothingRuns: an untimed game after setup, and a
// finished one, have no wait an outage could cost.
func TestNothingToExcuseWhenNothingRuns(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ch, err := Create(CreateParams{ID: "x", Variant: rules.Xiangqi, FirstMoveTime: 30 * time.Second}, now)
	if err != nil {
		t.Fatal(err)
	}
	if ex, ok := Excuse(ch.State, time.Minute, now.Add(time.Hour)); ok {
		t.Fatalf("an untimed game was excused: %v", ex.Events)
	}
	st, at := clocked(t)
	ch, err = Resign(st, rules.First, at)
	if err != nil {
		t.Fatal(err)
	}
	if ex, ok := Excuse(ch.State, time.Minute, at.Add(time.Hour)); ok {
		t.Fatalf("a finished game was excused: %v", ex.Events)
	}
}
