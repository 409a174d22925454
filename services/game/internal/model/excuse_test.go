package model

import (
	"testing"
	"time"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
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
	st, start := clocked(t)
	back := start.Add(20 * time.Second)
	ex, ok := Excuse(st, 10*time.Second, back)
	if !ok {
		t.Fatal("the first excuse")
	}
	Seal(ex, st.Version, back)
	st = ex.State
	entered := time.UnixMilli(st.WakeMs)
	ch, applied, err := Expire(st, st.WakeMs, entered)
	if err != nil || !applied || clockKinds(ch.Events)[0] != gamev1.ClockEventKind_CLOCK_EVENT_KIND_BYO_YOMI_ENTERED {
		t.Fatalf("byo-yomi: %v %v %v", applied, err, ch.Events)
	}
	Seal(ch, st.Version, entered)
	st = ch.State
	now := entered.Add(100 * time.Millisecond)
	if ex, ok = Excuse(st, 10500*time.Millisecond, now); !ok {
		t.Fatal("the longer excuse")
	}
	Seal(ex, st.Version, now)
	st = ex.State
	ch, applied, err = Expire(st, st.WakeMs, time.UnixMilli(st.WakeMs))
	if err != nil || !applied {
		t.Fatalf("the next wake-up: %v %v", applied, err)
	}
	if kinds := clockKinds(ch.Events); len(kinds) != 1 || kinds[0] != gamev1.ClockEventKind_CLOCK_EVENT_KIND_PERIOD_USED {
		t.Fatalf("the next wake-up announced %v, want the first period used only", kinds)
	}
}
