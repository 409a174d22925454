package model

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
)

// byo3x30 is byo-yomi alone: 3 periods of 30 s.
var byo3x30 = clock.Control{Kind: clock.ByoYomi, Periods: 3, PeriodTime: 30 * time.Second}

// serviceLag is the game service's default lag policy: a 1 s grace.
var serviceLag = clock.LagPolicy{MaxPerMove: time.Second, BankCap: 5 * time.Second, RefillPerMove: 500 * time.Millisecond}

// clocked is a Xiangqi game on the default clock (5 min + 3 x 30 s) with
// the service's lag policy, Red a human and Black the AI, after four
// quick moves: Red's clock runs from the instant returned.
func clocked(t *testing.T) (*State, time.Time) {
	t.Helper()
	return afterFourMoves(t, clock.Default(), serviceLag, [2]Seat{{PlayerID: "p"}, {PlayerID: "ai", AILevel: 1}})
}

// afterFourMoves is a Xiangqi game of seats on ctl and lag, after four
// moves 1 s apart: Red's clock runs from the instant returned.
func afterFourMoves(t *testing.T, ctl clock.Control, lag clock.LagPolicy, seats [2]Seat) (*State, time.Time) {
	t.Helper()
	now := time.UnixMilli(1_700_000_000_000)
	ch, err := Create(CreateParams{
		ID: "g", Variant: rules.Xiangqi, Control: &ctl, Lag: lag, FirstMoveTime: 30 * time.Second, Seats: seats,
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	st := ch.State
	for i, mv := range []string{"h3e3", "h10g8", "b1c3", "b10c8"} {
		now = now.Add(time.Second)
		st = must(t, mv)(Move(st, rules.Side(i%2), mv, 0, now))
	}
	return st, now
}

// must returns the state of a change that had to succeed.
func must(t *testing.T, what string) func(Change, error) *State {
	return func(ch Change, err error) *State {
		t.Helper()
		if err != nil || ch.Reply != nil {
			t.Fatalf("%s: %v %v", what, err, ch.Reply)
		}
		return ch.State
	}
}

// startFrom is the custom start of fen, which must be one.
func startFrom(t *testing.T, v rules.Variant, fen string) *rules.Game {
	t.Helper()
	g, err := StartFrom(v, fen)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// afterFlag is an instant just after the running side's flag.
func afterFlag(t *testing.T, st *State) time.Time {
	t.Helper()
	d, ok := st.Clock.Deadline()
	if !ok {
		t.Fatal("no clock runs")
	}
	return d.Add(50 * time.Millisecond)
}

// wantEndedOnTime checks a command refused because loser's flag came
// first, and the game ended on time with loser's clock flagged.
func wantEndedOnTime(t *testing.T, what string, ch Change, err error, loser rules.Side) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if apierr.CodeOf(ch.Reply) != apierr.Precondition || ch.State == nil || ch.State.Status != StatusEnded ||
		ch.State.Result.Method != rules.Timeout || *ch.State.Result.Side != loser {
		var status Status
		var result *Result
		if ch.State != nil {
			status, result = ch.State.Status, ch.State.Result
		}
		t.Fatalf("%s after %v's flag: reply %v, status %v, result %+v; want it refused and the game ended on time", what, loser, ch.Reply, status, result)
	}
	if c := ch.State.Clock; c.Phase != clock.Stopped || !c.Players[loser].Flagged || c.Players[loser.Opponent()].Flagged {
		t.Fatalf("%s: the final clock %+v does not show %v flagged", what, c, loser)
	}
	if ch.State.WakeMs != 0 {
		t.Fatalf("%s: an ended game wakes at %d", what, ch.State.WakeMs)
	}
}

// TestCommandsAfterAFlagEndTheGameOnTime: between a flag and the sweeper
// that would announce it, no command may decide the game otherwise.
func TestCommandsAfterAFlagEndTheGameOnTime(t *testing.T) {
	red, black := rules.First, rules.Second
	st, _ := clocked(t)
	late := afterFlag(t, st)
	ch, err := OfferDraw(st, black, late)
	wantEndedOnTime(t, "Black's draw offer", ch, err, red)
	ch, err = Resign(st, black, late)
	wantEndedOnTime(t, "Black's resignation", ch, err, red)
	ch, err = Resign(st, red, late)
	wantEndedOnTime(t, "Red's resignation", ch, err, red)
	ch, err = Undo(st, red, late)
	wantEndedOnTime(t, "Red's undo", ch, err, red)
	offered := must(t, "offer")(OfferDraw(st, black, late.Add(-time.Minute)))
	ch, err = AnswerDraw(offered, red, true, late)
	wantEndedOnTime(t, "Red accepting a draw", ch, err, red)
	ch, err = Move(st, red, "a4a5", 0, late)
	wantEndedOnTime(t, "Red's move", ch, err, red)
	// The AI's flag, when the human undoes while the AI is thinking.
	st, now := clocked(t)
	st = must(t, "a4a5")(Move(st, red, "a4a5", 0, now.Add(time.Second)))
	ch, err = Undo(st, red, afterFlag(t, st))
	wantEndedOnTime(t, "Red's undo after the AI's flag", ch, err, black)
	// Past the AI's budget but within a move's lag grace: a move could
	// still come in time, a handed-back turn cannot. The game ends where
	// it stood, the moves not taken back, after the milestones its turn
	// passed (announced as a late move would).
	d, _ := st.Clock.Deadline()
	ch, err = Undo(st, red, d.Add(-500*time.Millisecond))
	wantEndedOnTime(t, "Red's undo within the AI's lag grace", ch, err, black)
	passed := []gamev1.ClockEventKind{gamev1.ClockEventKind_CLOCK_EVENT_KIND_BYO_YOMI_ENTERED,
		gamev1.ClockEventKind_CLOCK_EVENT_KIND_PERIOD_USED, gamev1.ClockEventKind_CLOCK_EVENT_KIND_PERIOD_USED}
	if len(ch.State.Moves) != len(st.Moves) || len(ch.Events) != len(passed)+1 ||
		!slices.Equal(clockKinds(ch.Events), passed) || ch.Events[len(passed)].GetGameEnded() == nil {
		t.Fatalf("the refused undo took the game from %d to %d moves with events %v", len(st.Moves), len(ch.State.Moves), ch.Events)
	}
}

// TestNoGraceForTheRunningSidesOtherCommands: the lag grace forgives the
// network delay of a move. A command of the side whose clock runs that is
// no move has none to forgive: past the budget, it ends the game on time
// (accepting a draw would turn that loss into a draw). Its opponent's
// commands leave it the grace, for its move may be on its way.
func TestNoGraceForTheRunningSidesOtherCommands(t *testing.T) {
	red, black := rules.First, rules.Second
	st, _ := clocked(t)
	d, _ := st.Clock.Deadline()
	within := d.Add(-500 * time.Millisecond) // past Red's budget, within the grace
	offered := must(t, "Black's offer")(OfferDraw(st, black, within.Add(-time.Minute)))
	ch, err := AnswerDraw(offered, red, true, within)
	wantEndedOnTime(t, "Red accepting a draw within the grace", ch, err, red)
	ch, err = OfferDraw(st, red, within)
	wantEndedOnTime(t, "Red's draw offer within the grace", ch, err, red)
	ch, err = Resign(st, red, within)
	wantEndedOnTime(t, "Red's resignation within the grace", ch, err, red)
	if ch, err = OfferDraw(st, black, within); err != nil || ch.Reply != nil || ch.State.Status != StatusOngoing {
		t.Fatalf("Black's draw offer within Red's grace: %v %v; want it made, the game going on", err, ch.Reply)
	}
	ch, err = Resign(st, black, within)
	if err != nil || ch.Reply != nil || ch.State.Result.Method != rules.Resignation || *ch.State.Result.Side != black {
		t.Fatalf("Black's resignation within Red's grace: %v %v; want Black resigned", err, ch.Reply)
	}
}

// TestLateMoveShowsTheFlag: a move late by less than the lag grace, with no
// lag reported, ends the game with the clock that flagged it.
func TestLateMoveShowsTheFlag(t *testing.T) {
	st, _ := clocked(t)
	d, _ := st.Clock.Deadline()
	ch, err := Move(st, rules.First, "a4a5", 0, d.Add(-500*time.Millisecond)) // past the budget, within the grace
	wantEndedOnTime(t, "a move past the budget", ch, err, rules.First)
}

// TestALaggedMoveWithinTheGraceIsInTime: the same move as in
// TestLateMoveShowsTheFlag, with the network delay its client reported,
// is credited that delay and is in time.
func TestALaggedMoveWithinTheGraceIsInTime(t *testing.T) {
	st, _ := clocked(t)
	d, _ := st.Clock.Deadline()
	bank := st.Clock.Players[rules.First].LagBankMs
	n := must(t, "a lagged move within the grace")(Move(st, rules.First, "a4a5", time.Second, d.Add(-500*time.Millisecond)))
	if n.Status != StatusOngoing || n.Clock.Phase != clock.Running || n.Clock.Players[rules.First].Flagged {
		t.Fatalf("status %v, clock %+v; want the game going on", n.Status, n.Clock)
	}
	if got := n.Clock.Players[rules.First].LagBankMs; got >= bank {
		t.Fatalf("lag bank %dms after a credited move, had %dms; want it debited", got, bank)
	}
}

// TestALaggedMoveAnnouncesNoPeriodItsCreditKeeps: a move made just past
// the end of the first byo-yomi period, whose reported lag lands it within
// that period, keeps all three periods. Its commit once announced the
// period used and, in the same breath, the move's clocks with it back.
func TestALaggedMoveAnnouncesNoPeriodItsCreditKeeps(t *testing.T) {
	st, now := clocked(t)
	var periodUsed time.Time
	for _, e := range st.Clock.Events(now, now.Add(time.Hour)) {
		if e.Kind == clock.PeriodUsed {
			periodUsed = e.At
			break
		}
	}
	if periodUsed.IsZero() {
		t.Fatal("the clock has no period to use")
	}
	at := periodUsed.Add(500 * time.Millisecond)
	if got := st.Clock.Credit(at, time.Second); got != time.Second {
		t.Fatalf("credit %v for a 1 s lag, want 1s", got)
	}
	ch, err := Move(st, rules.First, "a4a5", time.Second, at)
	n := must(t, "a lagged move in the first period")(ch, err)
	if got := n.Clock.Players[rules.First].Periods; got != 3 {
		t.Fatalf("periods left after the move: %d, want 3", got)
	}
	want := []gamev1.ClockEventKind{gamev1.ClockEventKind_CLOCK_EVENT_KIND_BYO_YOMI_ENTERED}
	if got := clockKinds(ch.Events); !slices.Equal(got, want) {
		t.Fatalf("the move's commit announced %v, want only %v", got, want)
	}
	// Without the lag the same move used the period, and says so.
	ch, err = Move(st, rules.First, "a4a5", 0, at)
	want = append(want, gamev1.ClockEventKind_CLOCK_EVENT_KIND_PERIOD_USED)
	if got := must(t, "a move in the second period")(ch, err).Clock.Players[rules.First].Periods; got != 2 || !slices.Equal(clockKinds(ch.Events), want) {
		t.Fatalf("an unlagged move: %d periods left, events %v; want 2 and %v", got, clockKinds(ch.Events), want)
	}
}

// TestWakeOfAFlaggedClock: a running clock past its flag is due at once.
func TestWakeOfAFlaggedClock(t *testing.T) {
	st, _ := clocked(t)
	d, _ := st.Clock.Deadline()
	if got := wake(st, d.Add(time.Minute)); got != d.UnixMilli()+1 {
		t.Fatalf("wake after the flag = %d, want the flag instant %d", got, d.UnixMilli()+1)
	}
}

// TestUndoGivesTheAIAFreshPeriod: an undo while the AI thinks in byo-yomi
// ends the AI's turn as a move would: its next turn starts with a whole
// period, not the rest of the one cut short.
func TestUndoGivesTheAIAFreshPeriod(t *testing.T) {
	st, now := clocked(t)
	now = now.Add(time.Second)
	st = must(t, "a4a5")(Move(st, rules.First, "a4a5", 0, now))
	now = now.Add(5*time.Minute + 25*time.Second) // the AI, 25 s into its first period
	st = must(t, "undo")(Undo(st, rules.First, now))
	ai := st.Clock.Players[rules.Second]
	if ai.Periods != 3 || ai.PeriodMs != 30_000 || ai.MainMs != 0 {
		t.Fatalf("the AI's clock after the undo: %+v; want 3 whole periods of 30 s", ai)
	}
	if st.Clock.Phase != clock.Running || st.Clock.Turn != clock.First || st.Clock.TurnStartMs != now.UnixMilli() {
		t.Fatalf("after the undo the clock is %+v; want Red's running from the undo", st.Clock)
	}
}

// TestUndoDoesNotExtendTheHumansTurn: an undo in the human's own turn
// (after the AI's reply) takes moves back, not time: the turn goes on
// with the deadline it had. Begun again at the undo, it would get its
// budget again, and undos would hold off the flag for ever.
func TestUndoDoesNotExtendTheHumansTurn(t *testing.T) {
	st, now := clocked(t)
	now = now.Add(time.Second)
	st = must(t, "h1g3")(Move(st, rules.First, "h1g3", 0, now))
	now = now.Add(time.Second)
	st = must(t, "i10i9")(Move(st, rules.Second, "i10i9", 0, now))
	d, _ := st.Clock.Deadline()
	now = d.Add(-serviceLag.MaxPerMove - 50*time.Millisecond) // just before the budget ends
	st = must(t, "undo")(Undo(st, rules.First, now))
	if got, _ := st.Clock.Deadline(); !got.Equal(d) {
		t.Fatalf("the undo moved the deadline from %v to %v", d, got)
	}
	ch, err := Move(st, rules.First, "h1g3", time.Second, d.Add(time.Millisecond))
	if err != nil || !ch.State.Status.Finished() {
		t.Fatalf("a move after the deadline: %v, status %v; want the game ended on time", err, ch.State.Status)
	}
}

// TestMovingAndUndoingDoesNotFillThePeriodAgain: under byo-yomi a move fills
// its mover's period again. Its undo once left the period full, so that a
// human in the last period could play any move just before it ran out, take
// it back (before or after the AI's reply), and think on in the same
// position with a whole period, for as many undos as a game allows.
func TestMovingAndUndoingDoesNotFillThePeriodAgain(t *testing.T) {
	red, black := rules.First, rules.Second
	// 10 s of main time, then one (the last) period of 30 s.
	ctl := clock.Control{Kind: clock.ByoYomi, MainTime: 10 * time.Second, Periods: 1, PeriodTime: 30 * time.Second}
	for _, tc := range []struct {
		name      string
		aiReplies bool // undo after the AI's reply (two plies) or while it thinks (one)
	}{{"undo after the AI's reply", true}, {"undo while the AI thinks", false}} {
		t.Run(tc.name, func(t *testing.T) {
			st, now := afterFourMoves(t, ctl, clock.LagPolicy{}, [2]Seat{{PlayerID: "p"}, {PlayerID: "ai", AILevel: 1}})
			budget := time.Duration(st.Clock.Players[red].MainMs+st.Clock.Players[red].PeriodMs) * time.Millisecond
			thought := time.Duration(0)
			for cycle := 1; cycle <= 10; cycle++ {
				now = now.Add(25 * time.Second) // Red thinks 25 s on the same position
				thought += 25 * time.Second
				ch, err := Move(st, red, "a4a5", 0, now)
				if err != nil {
					t.Fatalf("cycle %d: move: %v", cycle, err)
				}
				if ch.State.Status != StatusOngoing {
					// 25 s of the budget went in the first cycle; 25 more
					// are past what the undo left.
					if cycle != 2 || ch.State.Result.Method != rules.Timeout {
						t.Fatalf("cycle %d: the game ended %+v after %v of thinking (budget %v); want a loss on time in cycle 2", cycle, ch.State.Result, thought, budget)
					}
					return
				}
				st = ch.State
				if tc.aiReplies {
					st = must(t, "the AI's reply")(Move(st, black, "a7a6", 0, now))
				}
				u, err := Undo(st, red, now)
				if err != nil {
					t.Fatalf("cycle %d: undo: %v", cycle, err)
				}
				if u.State.Status != StatusOngoing {
					t.Fatalf("cycle %d: the undo ended the game (%v)", cycle, u.Reply)
				}
				if left, want := u.State.Clock.Snapshot(now).Players[red], budget-thought; left.MainMs != 0 || left.Periods != 1 || left.Period() != want {
					t.Fatalf("cycle %d: after the undo Red has %+v; want the %v of its last period its move found", cycle, left, want)
				}
				st = u.State
			}
			snap := st.Clock.Snapshot(now)
			t.Fatalf("after 10 moves taken back Red has thought %v on one position with a budget of %v, and still has %d period(s) with %v left in it",
				thought, budget, snap.Players[red].Periods, time.Duration(snap.Players[red].PeriodMs)*time.Millisecond)
		})
	}
}

// aiGameAfterFourMoves is a game of a human (Red) against the AI under ctl,
// its clocks running after four moves.
func aiGameAfterFourMoves(t *testing.T, ctl clock.Control) (*State, time.Time) {
	return afterFourMoves(t, ctl, clock.LagPolicy{}, [2]Seat{{PlayerID: "p"}, {PlayerID: "ai", AILevel: 1}})
}

// redsPeriodsUsed lists the periods left that evs' PERIOD_USED events of
// Red announce.
func redsPeriodsUsed(evs []*gamev1.Event) []uint32 {
	var left []uint32
	for _, e := range evs {
		if c := e.GetClock(); c != nil && c.GetKind() == gamev1.ClockEventKind_CLOCK_EVENT_KIND_PERIOD_USED && c.GetSide() == commonv1.Side_SIDE_FIRST {
			left = append(left, c.GetClocks().GetFirst().GetPeriodsLeft())
		}
	}
	return left
}

// TestUndosInARowSpillIntoTheNextPeriod: Red (3 x 30 s) moves with 10 s
// left in its period, then thinks 25 s on its next move; the AI replies at
// once each time, and Red takes both moves back. The first undo leaves it
// 5 s of the period; the second withdraws 20 s more, which spills into the
// next period, and says so: 2 periods left, 15 s in the current one. The
// second undo was refused as if Red were out of time.
func TestUndosInARowSpillIntoTheNextPeriod(t *testing.T) {
	red, black := rules.First, rules.Second
	st, now := aiGameAfterFourMoves(t, byo3x30)
	now = now.Add(20 * time.Second)
	st = must(t, "a4a5")(Move(st, red, "a4a5", 0, now))
	st = must(t, "a7a6")(Move(st, black, "a7a6", 0, now))
	now = now.Add(25 * time.Second)
	st = must(t, "c4c5")(Move(st, red, "c4c5", 0, now))
	st = must(t, "c7c6")(Move(st, black, "c7c6", 0, now))
	st = must(t, "first undo")(Undo(st, red, now))
	ch, err := Undo(st, red, now)
	if err != nil || ch.Reply != nil {
		t.Fatalf("second undo refused: %v %v (Red has %+v)", err, ch.Reply, st.Clock.Snapshot(now).Players[red])
	}
	if p := ch.State.Clock.Snapshot(now).Players[red]; p.Periods != 2 || p.PeriodMs != 15_000 {
		t.Fatalf("Red after two undos: %+v; want 2 periods, 15 s left", p)
	}
	if got := redsPeriodsUsed(ch.Events); !slices.Equal(got, []uint32{2}) {
		t.Fatalf("the second undo announces Red's periods used down to %v; want [2]", got)
	}
}

// TestAnUndoAnnouncesThePeriodItsTakeBackUsedUp: Red (3 x 30 s) moves with
// 5 s left in its period, the AI replies at once, and Red undoes 10 s later.
// Without the refill, Red's turn ran past the end of its period 5 s in; the
// undo's announcements were made on the clock before the take-back, and
// its wake-up set after now, so that PERIOD_USED (3 -> 2) was never
// announced.
func TestAnUndoAnnouncesThePeriodItsTakeBackUsedUp(t *testing.T) {
	red, black := rules.First, rules.Second
	st, now := aiGameAfterFourMoves(t, byo3x30)
	now = now.Add(25 * time.Second)
	st = must(t, "a4a5")(Move(st, red, "a4a5", 0, now))
	turn := now
	st = must(t, "a7a6")(Move(st, black, "a7a6", 0, now))
	now = now.Add(10 * time.Second)
	u, err := Undo(st, red, now)
	if err != nil || u.Reply != nil {
		t.Fatalf("undo: %v %v", err, u.Reply)
	}
	if p := u.State.Clock.Snapshot(now).Players[red]; p.Periods != 2 {
		t.Fatalf("Red after the undo: %+v; want 2 periods (the take-back ends its first)", p)
	}
	evs := u.Events
	// The next wake-up, as the sweeper would run it.
	wk := u.State.WakeMs
	ex, applied, err := Expire(u.State, wk, time.UnixMilli(wk))
	if err != nil {
		t.Fatal(err)
	}
	if applied {
		evs = append(evs, ex.Events...)
	}
	if got := redsPeriodsUsed(evs); len(got) == 0 || got[0] != 2 {
		t.Fatalf("PERIOD_USED events for Red, periods left: %v; want the 3 -> 2 one (2) announced first", got)
	}
	for _, e := range u.Events {
		if c := e.GetClock(); c != nil && !e.GetTime().AsTime().Equal(turn.Add(5*time.Second+time.Millisecond)) {
			t.Fatalf("the undo's clock event is dated %v; want 1 ms past the end of the period, 5 s into Red's turn", e.GetTime().AsTime())
		}
	}
}

// TestAnUndoAfterAnExcuseAnnouncesEachPeriodOnce: Red (3 x 30 s) plays its
// move as its period ends (or 5 s before), the AI replies at once. In Red's
// next turn an outage is excused in two steps by two processes (1 s, then
// 10 s), a period announced in between, so that the mark of what was
// announced lies past now (see Excuse). Red then undoes. The undo counted
// the periods announced as of now, announcing one again, and left the mark
// where the clock before it had put it, past a milestone of the clock it
// leaves, never announced. Every PERIOD_USED of Red is announced once, by
// the undo or the sweeper after it, until Red's flag.
func TestAnUndoAfterAnExcuseAnnouncesEachPeriodOnce(t *testing.T) {
	for _, think := range []time.Duration{30 * time.Second, 25 * time.Second} {
		t.Run(think.String(), func(t *testing.T) { undoAfterAnExcuse(t, think) })
	}
}

func undoAfterAnExcuse(t *testing.T, think time.Duration) {
	red, black := rules.First, rules.Second
	st, now := aiGameAfterFourMoves(t, byo3x30)
	now = now.Add(think) // 30 s: exactly the whole period, in time
	st = must(t, "a4a5")(Move(st, red, "a4a5", 0, now))
	st = must(t, "a7a6")(Move(st, black, "a7a6", 0, now))
	t0 := now
	var evs []*gamev1.Event
	// One process excuses 1 s of an outage.
	ex, ok := Excuse(st, time.Second, t0.Add(20*time.Second))
	if !ok {
		t.Fatal("first excuse refused")
	}
	st = ex.State
	// The sweeper announces Red's first period used (3 -> 2).
	sweep := func(until time.Time) {
		for !st.Status.Finished() && st.WakeMs != 0 && st.WakeMs <= until.UnixMilli() {
			ch, applied, err := Expire(st, st.WakeMs, time.UnixMilli(st.WakeMs))
			if err != nil || !applied {
				t.Fatalf("expire at %d: %v %v", st.WakeMs, applied, err)
			}
			evs = append(evs, ch.Events...)
			st = ch.State
		}
	}
	sweep(t0.Add(31*time.Second + time.Millisecond))
	if got := redsPeriodsUsed(evs); !slices.Equal(got, []uint32{2}) {
		t.Fatalf("before the undo Red's PERIOD_USED: %v; want [2]", got)
	}
	// Another process excuses 10 s of the same outage.
	ex, ok = Excuse(st, 10*time.Second, t0.Add(31*time.Second+2*time.Millisecond))
	if !ok {
		t.Fatal("second excuse refused")
	}
	st = ex.State
	// Red undoes.
	now = t0.Add(32 * time.Second)
	u, err := Undo(st, red, now)
	if err != nil || u.Reply != nil {
		t.Fatalf("undo: %v %v", err, u.Reply)
	}
	evs = append(evs, u.Events...)
	st = u.State
	snap := st.Clock.Snapshot(now).Players[red]
	// Then the sweeper, to Red's flag.
	sweep(now.Add(10 * time.Minute))
	if !st.Status.Finished() {
		t.Fatalf("no flag: %v", st.Status)
	}
	if got := redsPeriodsUsed(evs); !slices.Equal(got, []uint32{2, 1}) {
		t.Fatalf("Red's PERIOD_USED announcements (periods left): %v; want [2 1], each once (after the undo Red had %d periods, %v left)",
			got, snap.Periods, snap.Period())
	}
}

// TestUndosDoNotRunTheAIOutOfTime: under byo-yomi (1 x 10 s) a human moves
// at once, the AI replies thinking as its worker budgets it
// (services/ai/internal/worker/budget.go: 3/4 of its period left less
// 300 ms, at least 20 ms; 50 ms more to reach the service), and the human
// takes both back. Withdrawing the AI's refill too left it, undo after
// undo, less of its period, until it lost on time with the human's most of
// its own left: the AI's reply keeps what it earned.
func TestUndosDoNotRunTheAIOutOfTime(t *testing.T) {
	red, black := rules.First, rules.Second
	ctl := clock.Control{Kind: clock.ByoYomi, Periods: 1, PeriodTime: 10 * time.Second}
	st, now := aiGameAfterFourMoves(t, ctl)
	for cycle := 1; cycle <= 60; cycle++ {
		now = now.Add(100 * time.Millisecond)
		ch, err := Move(st, red, "a4a5", 0, now)
		if err != nil {
			t.Fatal(err)
		}
		if ch.State.Status.Finished() {
			// Red's own thinking, 200 ms a cycle, is not given back.
			if ch.State.Result.Method != rules.Timeout || *ch.State.Result.Side != red || cycle < 40 {
				t.Fatalf("cycle %d: the game ended %+v; want Red out of time after some 50 cycles", cycle, ch.State.Result)
			}
			return
		}
		st = ch.State
		left := time.Duration(st.Clock.Players[black].PeriodMs) * time.Millisecond
		if left != ctl.PeriodTime {
			t.Fatalf("cycle %d: the AI starts its turn with %v of its period; want all of it", cycle, left)
		}
		now = now.Add(max(left*3/4-300*time.Millisecond, 20*time.Millisecond) + 50*time.Millisecond)
		st = must(t, "a7a6")(Move(st, black, "a7a6", 0, now))
		now = now.Add(100 * time.Millisecond)
		st = must(t, "undo")(Undo(st, red, now))
	}
	t.Fatal("Red thought 200 ms a cycle for 60 cycles on a 10 s period without losing on time")
}

// TestOnlyTheLastMoveShowsADeadline: the deadline belongs to the turn that
// runs, which follows the last move; older records must not show it.
func TestOnlyTheLastMoveShowsADeadline(t *testing.T) {
	st, now := clocked(t)
	g := View(st, nil, now)
	moves := g.GetMoves()
	if len(moves) != 4 {
		t.Fatalf("%d moves", len(moves))
	}
	for _, m := range moves[:3] {
		if m.GetClocks().GetDeadline() != nil {
			t.Fatalf("ply %d shows the running turn's deadline", m.GetPly())
		}
	}
	if d, _ := st.Clock.Deadline(); !moves[3].GetClocks().GetDeadline().AsTime().Equal(d) {
		t.Fatalf("the last move shows deadline %v, want %v", moves[3].GetClocks().GetDeadline(), d)
	}
}

// TestLateFormationGetsTheDefault: a choice made after the setup time is
// refused, and the default that was due is set, as the sweeper would.
func TestLateFormationGetsTheDefault(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ch, err := Create(CreateParams{ID: "j", Variant: rules.Janggi, SetupTime: time.Minute}, now)
	if err != nil {
		t.Fatal(err)
	}
	late := now.Add(time.Minute + time.Millisecond)
	ch, err = ChooseFormation(ch.State, rules.Second, rules.SangMaSangMa, late)
	if err != nil || apierr.CodeOf(ch.Reply) != apierr.Precondition {
		t.Fatalf("a late choice: %v, reply %v; want it refused", err, ch.Reply)
	}
	if f := ch.State.Formations[rules.Second]; f != rules.MaSangSangMa || !ch.Events[0].GetFormationChosen().GetByDefault() {
		t.Fatalf("after a late choice Han has %v (event %v); want the default", f, ch.Events[0])
	}
	// In time, the choice is taken.
	ch, err = Create(CreateParams{ID: "j", Variant: rules.Janggi, SetupTime: time.Minute}, now)
	if err != nil {
		t.Fatal(err)
	}
	st := must(t, "in time")(ChooseFormation(ch.State, rules.Second, rules.SangMaSangMa, now.Add(time.Minute)))
	if st.Formations[rules.Second] != rules.SangMaSangMa {
		t.Fatalf("a choice in time gave %v", st.Formations[rules.Second])
	}
}

// TestHansChoiceAfterItsDefaultIsToldSo: Han's choice that the default
// beat (the sweeper applied it as Han's setup time ran out, the choice on
// its way) was refused "Cho chooses now (Han first, then Cho)", as if Han
// had chosen out of turn.
func TestHansChoiceAfterItsDefaultIsToldSo(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ch, err := Create(CreateParams{ID: "j", Variant: rules.Janggi, SetupTime: time.Minute}, now)
	if err != nil {
		t.Fatal(err)
	}
	ch, applied, err := Expire(ch.State, ch.State.WakeMs, now.Add(time.Minute+time.Millisecond))
	if err != nil || !applied {
		t.Fatalf("the setup deadline: applied %v, %v", applied, err)
	}
	_, err = ChooseFormation(ch.State, rules.Second, rules.SangMaSangMa, now.Add(time.Minute+2*time.Millisecond))
	if apierr.CodeOf(err) != apierr.Precondition || !strings.Contains(err.Error(), "Han's is set already") || !strings.Contains(err.Error(), "setup time ran out") {
		t.Fatalf("Han's choice after the default: %v; want FAILED_PRECONDITION saying Han's formation is set, perhaps by the default", err)
	}
	// Cho choosing before Han is still told whose turn it is.
	ch, err = Create(CreateParams{ID: "j2", Variant: rules.Janggi, SetupTime: time.Minute}, now)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ChooseFormation(ch.State, rules.First, rules.SangMaSangMa, now)
	if apierr.CodeOf(err) != apierr.Precondition || !strings.Contains(err.Error(), "Han chooses now") {
		t.Fatalf("Cho choosing first: %v; want FAILED_PRECONDITION naming Han's turn", err)
	}
}

// TestCommandsAfterTheFirstMoveDeadlineAbortTheGame: an absent first mover
// aborts the game, whatever command comes after the deadline and before
// the sweeper: a resignation or a draw must not make it a rated result.
func TestCommandsAfterTheFirstMoveDeadlineAbortTheGame(t *testing.T) {
	red, black := rules.First, rules.Second
	now := time.UnixMilli(1_700_000_000_000)
	ctl := clock.Default()
	ch, err := Create(CreateParams{ID: "g", Variant: rules.Xiangqi, Control: &ctl, Lag: serviceLag, FirstMoveTime: 30 * time.Second, Rated: true,
		Seats: [2]Seat{{PlayerID: "p"}, {PlayerID: "q"}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	st := ch.State
	late := now.Add(31 * time.Second)
	offered := must(t, "offer")(OfferDraw(st, black, now.Add(time.Second)))
	for _, c := range []struct {
		what string
		run  func() (Change, error)
	}{
		{"Black's resignation", func() (Change, error) { return Resign(st, black, late) }},
		{"Red's resignation", func() (Change, error) { return Resign(st, red, late) }},
		{"Black's draw offer", func() (Change, error) { return OfferDraw(st, black, late) }},
		{"Red accepting a draw", func() (Change, error) { return AnswerDraw(offered, red, true, late) }},
		{"Red's move", func() (Change, error) { return Move(st, red, "h3e3", 0, late) }},
		{"Black's move out of turn", func() (Change, error) { return Move(st, black, "h10g8", 0, late) }},
	} {
		ch, err := c.run()
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if apierr.CodeOf(ch.Reply) != apierr.Precondition || ch.State == nil || ch.State.Status != StatusAborted ||
			ch.State.Result.Method != MethodAborted || ch.State.Result.Winner != rules.NoWinner || *ch.State.Result.Side != red {
			var result *Result
			if ch.State != nil {
				result = ch.State.Result
			}
			t.Fatalf("%s after the first-move deadline: reply %v, result %+v; want it refused and the game aborted for Red's absence", c.what, ch.Reply, result)
		}
		if ch.State.WakeMs != 0 {
			t.Fatalf("%s: an aborted game wakes at %d", c.what, ch.State.WakeMs)
		}
	}
}

// TestTheAIsSeatCannotUndo: refused as the rule it breaks
// (FailedPrecondition, as the API says of undo), not as a credential that
// is not the seat's own.
func TestTheAIsSeatCannotUndo(t *testing.T) {
	st, now := clocked(t)
	_, err := Undo(st, rules.Second, now)
	if apierr.CodeOf(err) != apierr.Precondition || !strings.Contains(err.Error(), "AI's seat") {
		t.Fatalf("undo by the AI's seat = %v, want FailedPrecondition naming the AI's seat", err)
	}
}

// TestEndAndUndoEventsCarryTheClocks: a client that follows only the
// stream sees the clocks an undo leaves (here the AI's turn cut short,
// and the human's clock started) and the clocks a game ended with, as a
// read of the game shows them.
func TestEndAndUndoEventsCarryTheClocks(t *testing.T) {
	red := rules.First
	st, now := clocked(t)
	now = now.Add(3 * time.Second)
	st = must(t, "a4a5")(Move(st, red, "a4a5", 0, now))
	now = now.Add(2 * time.Second)
	ch, err := Undo(st, red, now)
	if err != nil || ch.Reply != nil {
		t.Fatalf("undo: %v %v", err, ch.Reply)
	}
	undone := ch.Events[len(ch.Events)-1].GetMovesUndone().GetClocks()
	if want := Summary(ch.State, nil, now).GetClocks(); undone == nil || !proto.Equal(undone, want) {
		t.Fatalf("the undo's event shows clocks %v, a read %v", undone, want)
	}
	if undone.GetRunning() != commonv1.Side_SIDE_FIRST {
		t.Fatalf("after the undo %v's clock runs, want Red's", undone.GetRunning())
	}
	now = now.Add(1500 * time.Millisecond)
	ch, err = Resign(ch.State, red, now)
	if err != nil || ch.Reply != nil {
		t.Fatalf("resign: %v %v", err, ch.Reply)
	}
	ended := ch.Events[len(ch.Events)-1].GetGameEnded().GetClocks()
	if want := Summary(ch.State, nil, now).GetClocks(); ended == nil || !proto.Equal(ended, want) {
		t.Fatalf("the end's event shows clocks %v, a read %v", ended, want)
	}
	if ended.GetRunning() != commonv1.Side_SIDE_UNSPECIFIED || ended.GetFirst().GetMainLeft().AsDuration() >= st.Clock.Players[red].Main() {
		t.Fatalf("the end's clocks %v: want them stopped, with Red's last turn charged", ended)
	}
}

// TestClientsSeeTheSetupAndFirstMoveDeadlines: an app shows the countdown
// of every deadline that runs, so each is in the game's reads and in the
// event that starts it: Han's and then Cho's formation time, and each
// side's first move before the clock runs. After both first moves only
// the clock's own deadline runs.
func TestClientsSeeTheSetupAndFirstMoveDeadlines(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ctl := clock.Default()
	ch, err := Create(CreateParams{ID: "j", Variant: rules.Janggi, Control: &ctl, Lag: serviceLag, SetupTime: time.Minute, FirstMoveTime: 30 * time.Second}, now)
	if err != nil {
		t.Fatal(err)
	}
	at := func(ts interface{ AsTime() time.Time }) time.Time { return ts.AsTime() }
	if got := Summary(ch.State, nil, now).GetSetupDeadline(); got == nil || !at(got).Equal(now.Add(time.Minute)) {
		t.Fatalf("Han's setup deadline reads %v, want %v", got, now.Add(time.Minute))
	}
	now = now.Add(10 * time.Second)
	ch, err = ChooseFormation(ch.State, rules.Second, rules.SangMaSangMa, now)
	if err != nil || ch.Reply != nil {
		t.Fatalf("Han's choice: %v %v", err, ch.Reply)
	}
	chosen := ch.Events[0].GetFormationChosen().GetSetupDeadline()
	read := Summary(ch.State, nil, now).GetSetupDeadline()
	if chosen == nil || read == nil || !at(chosen).Equal(now.Add(time.Minute)) || !at(read).Equal(at(chosen)) {
		t.Fatalf("Cho's setup deadline: event %v, read %v; want %v", chosen, read, now.Add(time.Minute))
	}
	now = now.Add(10 * time.Second)
	ch, err = ChooseFormation(ch.State, rules.First, rules.MaSangSangMa, now)
	if err != nil || ch.Reply != nil {
		t.Fatalf("Cho's choice: %v %v", err, ch.Reply)
	}
	started := ch.Events[len(ch.Events)-1].GetGameStarted().GetClocks().GetFirstMoveDeadline()
	if started == nil || !at(started).Equal(now.Add(30*time.Second)) || Summary(ch.State, nil, now).GetSetupDeadline() != nil {
		t.Fatalf("at the start: first-move deadline %v, want %v, and no setup deadline", started, now.Add(30*time.Second))
	}
	now = now.Add(5 * time.Second)
	ch, err = Move(ch.State, rules.First, "a4a5", 0, now)
	if err != nil || ch.Reply != nil {
		t.Fatalf("Cho's first move: %v %v", err, ch.Reply)
	}
	moved := ch.Events[len(ch.Events)-1].GetMovePlayed().GetClocks().GetFirstMoveDeadline()
	read = Summary(ch.State, nil, now).GetClocks().GetFirstMoveDeadline()
	if moved == nil || read == nil || !at(moved).Equal(now.Add(30*time.Second)) || !at(read).Equal(at(moved)) {
		t.Fatalf("Han's first-move deadline: event %v, read %v; want %v", moved, read, now.Add(30*time.Second))
	}
	now = now.Add(5 * time.Second)
	ch, err = Move(ch.State, rules.Second, "a7a6", 0, now)
	if err != nil || ch.Reply != nil {
		t.Fatalf("Han's first move: %v %v", err, ch.Reply)
	}
	c := Summary(ch.State, nil, now).GetClocks()
	if c.GetFirstMoveDeadline() != nil || c.GetDeadline() == nil || ch.Events[len(ch.Events)-1].GetMovePlayed().GetClocks().GetFirstMoveDeadline() != nil {
		t.Fatalf("after both first moves the clocks read %v; want the clock's deadline only", c)
	}
}

// TestClockMilestonesLeaveTheExpectedVersionCurrent: a byo-yomi milestone
// the sweeper announces adds a version but changes nothing a client
// decides its move on; a flag does.
func TestClockMilestonesLeaveTheExpectedVersionCurrent(t *testing.T) {
	st, _ := clocked(t)
	st.Version, st.PlayVersion = 9, 9 // as the commits of its moves left it
	read := st.Version
	ch, applied, err := Expire(st, st.WakeMs, time.UnixMilli(st.WakeMs))
	if err != nil || !applied || len(ch.Events) == 0 || ch.Events[0].GetClock() == nil {
		t.Fatalf("the milestone: applied %v, events %v, %v", applied, ch.Events, err)
	}
	Seal(ch, st.Version, time.UnixMilli(st.WakeMs))
	if ch.State.Version == read || !ch.State.Current(read) {
		t.Fatalf("after a milestone at version %d, version %d is not current", ch.State.Version, read)
	}
	flagged := ch.State
	at := afterFlag(t, flagged)
	ch, applied, err = Expire(flagged, flagged.WakeMs, at)
	for applied && err == nil && !ch.State.Status.Finished() {
		Seal(ch, flagged.Version, at)
		flagged = ch.State
		ch, applied, err = Expire(flagged, flagged.WakeMs, at)
	}
	if err != nil || !applied {
		t.Fatalf("the flag: applied %v, %v", applied, err)
	}
	Seal(ch, flagged.Version, at)
	if ch.State.Current(read) || !ch.State.Current(ch.State.Version) {
		t.Fatalf("after the flag at version %d, version %d is still current", ch.State.Version, read)
	}
}

// TestTheEndingMoveStartsNoTurn: the move that ends a game shows the clocks
// stopped, in its event as in later reads, not the opponent's turn running
// with a deadline that will never come.
func TestTheEndingMoveStartsNoTurn(t *testing.T) {
	for _, c := range []struct {
		name, fen string
		moves     []string
	}{
		{"mate once the clock runs", "4k4/R8/9/9/P8/9/9/9/9/3K4R w - - 0 1", []string{"a6a7", "e10f10", "i1i10"}},
		{"mate on the first move", "4k4/R8/9/9/9/9/9/9/9/3K4R w - - 0 1", []string{"i1i10"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			now := time.UnixMilli(1_700_000_000_000)
			ctl := clock.Default()
			ch, err := Create(CreateParams{ID: "g", Variant: rules.Xiangqi, Control: &ctl, Lag: serviceLag, FirstMoveTime: 30 * time.Second, Start: startFrom(t, rules.Xiangqi, c.fen)}, now)
			if err != nil {
				t.Fatal(err)
			}
			st := ch.State
			for i, mv := range c.moves {
				now = now.Add(time.Second)
				ch, err = Move(st, rules.Side(i%2), mv, 0, now)
				st = must(t, mv)(ch, err)
			}
			if st.Status != StatusEnded || st.Result.Method != rules.Checkmate {
				t.Fatalf("status %v, result %+v: want checkmate", st.Status, st.Result)
			}
			played := ch.Events[len(ch.Events)-2].GetMovePlayed().GetClocks()
			ended := ch.Events[len(ch.Events)-1].GetGameEnded().GetClocks()
			if played == nil || played.GetRunning() != commonv1.Side_SIDE_UNSPECIFIED || played.GetDeadline() != nil || played.GetFirstMoveDeadline() != nil {
				t.Fatalf("the mating move's event shows clocks %v: want them stopped, with no deadline", played)
			}
			if !proto.Equal(played, ended) {
				t.Fatalf("the mating move shows clocks %v, the end %v", played, ended)
			}
			read := View(st, nil, now.Add(time.Minute)).GetMoves()
			if got := read[len(read)-1].GetClocks(); !proto.Equal(got, played) {
				t.Fatalf("a read shows the mating move's clocks as %v, its event as %v", got, played)
			}
		})
	}
}

// TestUndoShowsTheClocksItLeft: after an undo, the last move left shows
// the running turn's clocks as the undo left them, as the game's own
// clocks do, not those of when that move was played mixed with the new
// deadline; and the state before the undo, whose moves the new one shares,
// keeps its own.
func TestUndoShowsTheClocksItLeft(t *testing.T) {
	red, black := rules.First, rules.Second
	st, now := clocked(t)
	now = now.Add(3 * time.Second)
	st = must(t, "a4a5")(Move(st, red, "a4a5", 0, now))
	now = now.Add(2 * time.Second)
	st = must(t, "a7a6")(Move(st, black, "a7a6", 0, now))
	now = now.Add(4 * time.Second)
	before := View(st, nil, now)
	undone := must(t, "undo")(Undo(st, red, now))
	g := View(undone, nil, now)
	last := g.GetMoves()[len(g.GetMoves())-1]
	if last.GetPly() != 4 || !proto.Equal(last.GetClocks(), g.GetClocks()) {
		t.Fatalf("after the undo, ply %d shows clocks %v; the game's are %v", last.GetPly(), last.GetClocks(), g.GetClocks())
	}
	if again := View(st, nil, now); !proto.Equal(again, before) {
		t.Fatalf("the undo changed the state before it: %v, was %v", again, before)
	}
}

// TestAFlagComesBeforeTheMoveIsLookedAt: a move or pass after its side's
// flag ends the game on time whatever the move: an illegal one, or a pass
// in check, is not refused for that while the true answer is the flag.
func TestAFlagComesBeforeTheMoveIsLookedAt(t *testing.T) {
	red := rules.First
	st, _ := clocked(t)
	ch, err := Move(st, red, "a4a9", 0, afterFlag(t, st))
	wantEndedOnTime(t, "an illegal move after the flag", ch, err, red)
	// The opponent's move, out of turn, finds the flag too: the game had
	// ended, whose turn it was no longer matters.
	ch, err = Move(st, red.Opponent(), "h10g8", 0, afterFlag(t, st))
	wantEndedOnTime(t, "Black's move out of turn", ch, err, red)

	now := time.UnixMilli(1_700_000_000_000)
	ctl := clock.Default()
	ch, err = Create(CreateParams{ID: "j", Variant: rules.Janggi, Control: &ctl, Lag: serviceLag, Start: startFrom(t, rules.Janggi, "4k4/9/9/p8/9/9/9/9/5K3/R7R w - - 0 1")}, now)
	if err != nil {
		t.Fatal(err)
	}
	st = ch.State
	for i, mv := range []string{"a1a2", "a7a6", "i1i10"} {
		now = now.Add(time.Second)
		st = must(t, mv)(Move(st, rules.Side(i%2), mv, 0, now))
	}
	han := rules.Second
	if g, _ := st.Game(); !g.Position().InCheck() || st.Turn() != han {
		t.Fatal("Han is not in check to move")
	}
	late := afterFlag(t, st)
	ch, err = Pass(st, han, 0, late)
	wantEndedOnTime(t, "a pass in check after the flag", ch, err, han)
	ch, err = Move(st, han, "e10e10", 0, late)
	wantEndedOnTime(t, "a pass in check, as a move, after the flag", ch, err, han)
	ch, err = Pass(st, han.Opponent(), 0, late)
	wantEndedOnTime(t, "Cho's pass out of turn", ch, err, han)
	// Before the flag, the pass in check is refused for what it is.
	if _, err := Pass(st, han, 0, late.Add(-time.Minute)); apierr.CodeOf(err) != apierr.Precondition || !strings.Contains(err.Error(), "in check") {
		t.Fatalf("a pass in check in time: %v", err)
	}
}

// TestCommandsAfterASetupDeadlineSetTheDefault: a setup time that ran out
// unswept is met by whatever command comes next, not only by a late
// choice: the default that was due is set and the command refused, one
// deadline at a time, so that a resignation cannot be recorded in a game
// the sweeper would have started, or aborted for want of a first move.
func TestCommandsAfterASetupDeadlineSetTheDefault(t *testing.T) {
	cho, han := rules.First, rules.Second
	now := time.UnixMilli(1_700_000_000_000)
	ctl := clock.Default()
	ch, err := Create(CreateParams{ID: "j", Variant: rules.Janggi, Control: &ctl, Lag: serviceLag, SetupTime: time.Minute, FirstMoveTime: 30 * time.Second}, now)
	if err != nil {
		t.Fatal(err)
	}
	defaulted := func(what string, ch Change, err error, side rules.Side) *State {
		t.Helper()
		if err != nil || apierr.CodeOf(ch.Reply) != apierr.Precondition || !strings.Contains(ch.Reply.Error(), "time to choose a formation ran out") {
			t.Fatalf("%s: %v, reply %v; want it refused for the setup time", what, err, ch.Reply)
		}
		if e := ch.Events[0].GetFormationChosen(); !e.GetByDefault() || rules.Side(e.GetSide()-1) != side || ch.State.Formations[side] != rules.MaSangSangMa {
			t.Fatalf("%s: events %v; want %v's default formation", what, ch.Events, side)
		}
		return ch.State
	}
	now = now.Add(time.Minute + time.Millisecond)
	// Cho's choice, though Han chooses first, meets Han's deadline too.
	late, err := ChooseFormation(ch.State, cho, rules.SangMaSangMa, now)
	defaulted("Cho's choice after Han's setup time", late, err, han)
	ch, err = Resign(ch.State, cho, now)
	st := defaulted("Cho's resignation after Han's setup time", ch, err, han)
	if st.Status != StatusSetup || st.Turn() != cho {
		t.Fatalf("status %v, turn %v: want Cho choosing", st.Status, st.Turn())
	}
	// Cho's own setup time runs from Han's default.
	if _, err := Move(st, cho, "a4a5", 0, now); apierr.CodeOf(err) != apierr.Precondition || !strings.Contains(err.Error(), "still being chosen") {
		t.Fatalf("Cho's move while Cho chooses: %v", err)
	}
	now = now.Add(time.Minute + time.Millisecond)
	ch, err = Pass(st, cho, 0, now)
	st = defaulted("Cho's pass after Cho's setup time", ch, err, cho)
	if st.Status != StatusOngoing {
		t.Fatalf("status %v after both defaults: want the game started", st.Status)
	}
	ch, err = Resign(st, han, now.Add(31*time.Second))
	if err != nil || ch.State.Status != StatusAborted {
		t.Fatalf("Han's resignation after the first-move deadline: %v, status %v; want the game aborted", err, ch.State.Status)
	}
}
