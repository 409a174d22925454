package model

import (
	"slices"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/clock"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
)

// wantWokenFor checks that st's wake-up is applied when due and announces
// want first: a current wake-up that changes nothing would be dropped by
// the sweeper after StaleAfter, and the game never looked at again.
func wantWokenFor(t *testing.T, what string, st *State, want gamev1.ClockEventKind) {
	t.Helper()
	if st.WakeMs <= st.ClockEventsMs {
		t.Errorf("%s: the wake-up %d is on a milestone announced already (up to %d)", what, st.WakeMs, st.ClockEventsMs)
	}
	ch, applied, err := Expire(st, st.WakeMs, time.UnixMilli(st.WakeMs))
	if err != nil || !applied {
		t.Fatalf("%s: the game's own wake-up, when due: applied %v, err %v", what, applied, err)
	}
	if kinds := clockKinds(ch.Events); len(kinds) == 0 || kinds[0] != want {
		t.Fatalf("%s: the wake-up announced %v, want %v first", what, kinds, want)
	}
}

// TestAnExcusedOutageNeverLosesTheWakeUp: after an excuse that moved the
// announced mark past now, a draw offer or an undo (the human's own turn
// goes on, its clock untouched) sets the next wake-up on the next milestone
// not yet announced, not on the one announced already: that one would find
// nothing to announce, and the sweeper would drop the game's only entry.
func TestAnExcusedOutageNeverLosesTheWakeUp(t *testing.T) {
	st, now, _ := afterALongerExcuse(t)
	at := now.Add(10 * time.Millisecond)
	offered := must(t, "Black's draw offer")(OfferDraw(st, rules.Second, at))
	wantWokenFor(t, "after the draw offer", offered, gamev1.ClockEventKind_CLOCK_EVENT_KIND_PERIOD_USED)

	undone, err := Undo(st, rules.First, at)
	if err != nil || undone.Reply != nil {
		t.Fatalf("Red's undo: %v %v", err, undone.Reply)
	}
	if undone.State.Clock.Turn != clock.First || undone.State.Clock.TurnStartMs != st.Clock.TurnStartMs {
		t.Fatalf("the undo changed Red's running turn: %+v", undone.State.Clock)
	}
	wantWokenFor(t, "after the undo", undone.State, gamev1.ClockEventKind_CLOCK_EVENT_KIND_PERIOD_USED)
}

// TestAMoveAfterAnExcusedOutageWakesForTheOpponentsTurn: process B announced
// Red's byo-yomi while process A was cut off from Redis; A, back, excuses
// the outage, which moves the announced mark past the instant of Red's
// move. Black's turn starts with nothing of it announced: its entry into
// byo-yomi, before that mark, is woken for and announced.
func TestAMoveAfterAnExcusedOutageWakesForTheOpponentsTurn(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ctl := clock.Control{Kind: clock.ByoYomi, MainTime: 10 * time.Second, Periods: 3, PeriodTime: 30 * time.Second}
	ch, err := Create(CreateParams{
		ID: "g", Variant: rules.Xiangqi, Control: &ctl, Lag: serviceLag, FirstMoveTime: 30 * time.Second,
		Seats: [2]Seat{{PlayerID: "a"}, {PlayerID: "b"}},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	st := ch.State
	// Free first moves, then Red 1 s, Black 5 s: Red has 9 s left, Black 5 s.
	for i, step := range []struct {
		mv string
		d  time.Duration
	}{{"h3e3", time.Second}, {"h10g8", time.Second}, {"b1c3", time.Second}, {"b10c8", 5 * time.Second}} {
		now = now.Add(step.d)
		st = must(t, step.mv)(Move(st, rules.Side(i%2), step.mv, 0, now))
	}
	turn := now
	entered := turn.Add(9 * time.Second)
	exp, applied, err := Expire(st, st.WakeMs, entered)
	if err != nil || !applied || st.WakeMs != ms(entered) {
		t.Fatalf("Red's byo-yomi at %d (wake-up %d): %v %v", ms(entered), st.WakeMs, applied, err)
	}
	Seal(exp, st.Version, entered)
	st = exp.State
	// A was cut off from turn+1s to turn+21s.
	back := turn.Add(21 * time.Second)
	ex, ok := Excuse(st, 20*time.Second, back)
	if !ok {
		t.Fatal("excuse")
	}
	Seal(ex, st.Version, back)
	st = ex.State
	moved := turn.Add(22 * time.Second)
	mv, err := Move(st, rules.First, "h1g3", 0, moved)
	if err != nil || mv.Reply != nil {
		t.Fatal(err, mv.Reply)
	}
	Seal(mv, st.Version, moved)
	st = mv.State
	if want := ms(moved.Add(5 * time.Second)); st.WakeMs != want {
		t.Fatalf("Black's wake-up %d, want its entry into byo-yomi at %d", st.WakeMs, want)
	}
	wantWokenFor(t, "Black's turn", st, gamev1.ClockEventKind_CLOCK_EVENT_KIND_BYO_YOMI_ENTERED)
}

// TestAWakeUpOnAMilestoneAnnouncedAlreadyMovesOn: a game stored by a build
// that set its wake-up on a milestone announced already (see
// TestAnExcusedOutageNeverLosesTheWakeUp) heals when that wake-up is due:
// Expire applies it, with no event and no new version, moving the wake-up
// to the next milestone, so that the index gets its entry before the
// sweeper drops the old one.
func TestAWakeUpOnAMilestoneAnnouncedAlreadyMovesOn(t *testing.T) {
	st, now, entered := afterALongerExcuse(t)
	broken := clone(st)
	broken.WakeMs = ms(entered.Add(500 * time.Millisecond)) // byo-yomi, moved by the longer excuse
	if broken.WakeMs > broken.ClockEventsMs {
		t.Fatalf("the wake-up %d is not on an announced milestone (up to %d)", broken.WakeMs, broken.ClockEventsMs)
	}
	due := time.UnixMilli(broken.WakeMs)
	if due.Before(now) {
		t.Fatalf("the announced milestone %v lies before now %v: the case is not built", due, now)
	}
	ch, applied, err := Expire(broken, broken.WakeMs, due)
	if err != nil || !applied {
		t.Fatalf("the due wake-up with nothing to announce: applied %v, err %v; want it applied, or its entry is lost", applied, err)
	}
	if len(ch.Events) != 0 {
		t.Fatalf("it announced %v, want nothing", ch.Events)
	}
	Seal(ch, broken.Version, due)
	if ch.State.Version != broken.Version {
		t.Fatalf("the version went from %d to %d with no event", broken.Version, ch.State.Version)
	}
	if ch.State.WakeMs != st.WakeMs {
		t.Fatalf("the wake-up moved to %d, want the next milestone not announced, %d", ch.State.WakeMs, st.WakeMs)
	}
	wantWokenFor(t, "the moved wake-up", ch.State, gamev1.ClockEventKind_CLOCK_EVENT_KIND_PERIOD_USED)
}

// TestCommandsAnnounceAMilestoneJustPassed: Red's byo-yomi is due and the
// sweeper has not handled it yet when Black offers a draw, or Red undoes.
// The command announces it first, as a move does: its new wake-up replaces
// the entry, and byo-yomi would otherwise come out only with the next
// milestone, 30 s late.
func TestCommandsAnnounceAMilestoneJustPassed(t *testing.T) {
	st, _ := clocked(t)
	entered := time.UnixMilli(st.WakeMs)
	at := entered.Add(5 * time.Millisecond)
	byoyomi := []gamev1.ClockEventKind{gamev1.ClockEventKind_CLOCK_EVENT_KIND_BYO_YOMI_ENTERED}
	for _, c := range []struct {
		what string
		run  func() (Change, error)
	}{
		{"Black's draw offer", func() (Change, error) { return OfferDraw(st, rules.Second, at) }},
		{"Red's undo", func() (Change, error) { return Undo(st, rules.First, at) }},
	} {
		ch, err := c.run()
		if err != nil || ch.Reply != nil {
			t.Fatalf("%s: %v %v", c.what, err, ch.Reply)
		}
		if kinds := clockKinds(ch.Events); !slices.Equal(kinds, byoyomi) || ch.Events[0].GetClock() == nil {
			t.Errorf("%s announced %v, want byo-yomi, before its own event", c.what, kinds)
			continue
		}
		if got := ch.Events[0].GetTime().AsTime(); !got.Equal(entered) {
			t.Errorf("%s: byo-yomi announced as of %v, want %v", c.what, got, entered)
		}
		wantWokenFor(t, "after "+c.what, ch.State, gamev1.ClockEventKind_CLOCK_EVENT_KIND_PERIOD_USED)
	}
}

// TestAnUndoInTheAIsTurnStartsTheHumansWithNothingAnnounced: an undo that
// cuts the AI's turn short after an excuse moved the announced mark past
// now starts the human's turn with nothing of it announced, as a move does.
func TestAnUndoInTheAIsTurnStartsTheHumansWithNothingAnnounced(t *testing.T) {
	st, now, _ := afterALongerExcuse(t)
	st = must(t, "Red's move")(Move(st, rules.First, "a4a5", 0, now.Add(10*time.Millisecond)))
	// The mark stands past now again: as if the AI's turn had been excused
	// by two processes in turn, and announced in between.
	st.ClockEventsMs = ms(now.Add(time.Minute))
	undone, err := Undo(st, rules.First, now.Add(time.Second))
	if err != nil || undone.Reply != nil {
		t.Fatalf("Red's undo: %v %v", err, undone.Reply)
	}
	if undone.State.Clock.Turn != clock.First {
		t.Fatalf("the undo left the turn to %v", undone.State.Clock.Turn)
	}
	// Red's move was credited its lag: Red enters byo-yomi again.
	wantWokenFor(t, "Red's turn after the undo", undone.State, gamev1.ClockEventKind_CLOCK_EVENT_KIND_BYO_YOMI_ENTERED)
}
