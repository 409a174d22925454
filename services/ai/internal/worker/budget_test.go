package worker

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

func TestThinkBudget(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	red, black := commonv1.Side_SIDE_FIRST, commonv1.Side_SIDE_SECOND
	fischer := func(inc time.Duration) *commonv1.TimeControl {
		return &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(time.Minute), Increment: durationpb.New(inc)}}}
	}
	byoYomi := &commonv1.TimeControl{Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{MainTime: durationpb.New(time.Minute), Periods: 3, PeriodTime: durationpb.New(2 * time.Second)}}}
	running := func(tc *commonv1.TimeControl, side commonv1.Side, pc *commonv1.PlayerClock, asOf time.Time) *gamev1.Game {
		c := &commonv1.ClockSnapshot{First: pc, Second: pc, Running: side, AsOf: timestamppb.New(asOf)}
		return &gamev1.Game{TimeControl: tc, Clocks: c}
	}
	main := func(d time.Duration) *commonv1.PlayerClock {
		return &commonv1.PlayerClock{MainLeft: durationpb.New(d), PeriodsLeft: 3, PeriodLeft: durationpb.New(2 * time.Second)}
	}
	for _, c := range []struct {
		name string
		g    *gamev1.Game
		side commonv1.Side
		held time.Duration // how long the worker has held the snapshot
		want time.Duration
	}{
		{"no clock", &gamev1.Game{}, red, 0, 0},
		{"fischer: a thirtieth of the time left, most of the increment", running(fischer(2*time.Second), red, main(30*time.Second), now), red, 0, time.Second + 1500*time.Millisecond - moveMargin},
		{"fischer: the time the snapshot was held is spent", running(fischer(0), red, main(31*time.Second), now), red, time.Second, time.Second - moveMargin},
		{"fischer: the host's clock is not the snapshot's", running(fischer(0), red, main(30*time.Second), now.Add(-time.Hour)), red, 0, time.Second - moveMargin},
		{"fischer: at most half the time left", running(fischer(10*time.Second), red, main(time.Second), now), red, 0, 500*time.Millisecond - moveMargin},
		{"fischer: flagging, a little", running(fischer(0), red, main(100*time.Millisecond), now), red, 0, minBudget},
		{"byo-yomi main time: a thirtieth", running(byoYomi, red, main(3*time.Minute), now), red, 0, 6*time.Second - moveMargin},
		{"byo-yomi main time running out: most of a period", running(byoYomi, red, main(time.Second), now), red, 0, 1500*time.Millisecond - moveMargin},
		{"in byo-yomi: most of the period left", running(byoYomi, black, &commonv1.PlayerClock{PeriodsLeft: 2, PeriodLeft: durationpb.New(time.Second), InByoYomi: true}, now), black, 0, 750*time.Millisecond - moveMargin},
		{"in byo-yomi: the time the snapshot was held is spent", running(byoYomi, black, &commonv1.PlayerClock{PeriodsLeft: 2, PeriodLeft: durationpb.New(2 * time.Second), InByoYomi: true}, now), black, 800 * time.Millisecond, 900*time.Millisecond - moveMargin},
		{"first move: half the time to its deadline", &gamev1.Game{TimeControl: byoYomi, Clocks: &commonv1.ClockSnapshot{AsOf: timestamppb.New(now), FirstMoveDeadline: timestamppb.New(now.Add(10 * time.Second))}}, red, 0, 5*time.Second - moveMargin},
		{"first move: the time the snapshot was held is spent", &gamev1.Game{TimeControl: byoYomi, Clocks: &commonv1.ClockSnapshot{AsOf: timestamppb.New(now), FirstMoveDeadline: timestamppb.New(now.Add(10 * time.Second))}}, red, 2 * time.Second, 4*time.Second - moveMargin},
	} {
		if got := thinkBudget(c.g, c.side, c.held); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// secondToMove makes games under byo-yomi of a minute and periods of a
// second, the second seat to move, its clock (both seats') pc.
func secondToMove(periods uint32) func(pc *commonv1.PlayerClock) *gamev1.Game {
	tc := &commonv1.TimeControl{Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{
		MainTime: durationpb.New(time.Minute), Periods: periods, PeriodTime: durationpb.New(time.Second)}}}
	return func(pc *commonv1.PlayerClock) *gamev1.Game {
		return &gamev1.Game{TimeControl: tc, Clocks: &commonv1.ClockSnapshot{
			First: pc, Second: pc, Running: commonv1.Side_SIDE_SECOND, AsOf: timestamppb.New(time.UnixMilli(1_700_000_000_000))}}
	}
}

// TestByoYomiBudgetCountsTheTimeHeldAgainstTheFirstPeriod: the snapshot
// shows the AI with 100 ms of main time and one 1 s period left, and the
// worker held it 800 ms (a game service that stalled after its read):
// 300 ms are left on the clock when the search starts. The time held was
// taken from main time, and from the period once the snapshot showed
// byo-yomi, but not from the period that follows main time: the budget
// was 450 ms, and the AI lost on time.
func TestByoYomiBudgetCountsTheTimeHeldAgainstTheFirstPeriod(t *testing.T) {
	second := commonv1.Side_SIDE_SECOND
	game := secondToMove(1)
	const held = 800 * time.Millisecond
	inMain := game(&commonv1.PlayerClock{MainLeft: durationpb.New(100 * time.Millisecond), PeriodsLeft: 1, PeriodLeft: durationpb.New(time.Second)})
	clockLeft := 100*time.Millisecond + time.Second - held // to the flag, from the search's start
	got := thinkBudget(inMain, second, held)
	// The same clock read 100 ms later: in byo-yomi, 900 ms of its period left.
	inByoYomi := game(&commonv1.PlayerClock{PeriodsLeft: 1, PeriodLeft: durationpb.New(900 * time.Millisecond), InByoYomi: true})
	later := thinkBudget(inByoYomi, second, held-100*time.Millisecond)
	t.Logf("main 100 ms + 1 x 1 s, held %v: budget %v (clock left %v); the same clock in byo-yomi: %v", held, got, clockLeft, later)
	if got > max(clockLeft-moveMargin, minBudget) {
		t.Fatalf("budget %v (+%v for the move to arrive) for a clock with %v left to its flag: the AI loses on time (the same clock, read once in byo-yomi, gets %v)", got, moveMargin, clockLeft, later)
	}
}

// TestByoYomiBudgetAfterAPeriodLostWhileHeld: byo-yomi with three 1 s
// periods. The worker held the snapshot longer than what was left of main
// time plus the current period: the clock (pkg/clock) has then lost that
// period and started the next, a fresh one, of which 800 ms are left when
// the search starts. The time held was counted only against the current
// period, found negative, and the AI given 20 ms, where the same clock
// read a moment later, in the next period, gets 300 ms.
func TestByoYomiBudgetAfterAPeriodLostWhileHeld(t *testing.T) {
	second := commonv1.Side_SIDE_SECOND
	game := secondToMove(3)
	// The same clock, read 100 ms before the search starts: the second
	// period, 900 ms of it left, two periods left.
	later := thinkBudget(game(&commonv1.PlayerClock{PeriodsLeft: 2, PeriodLeft: durationpb.New(900 * time.Millisecond), InByoYomi: true}), second, 100*time.Millisecond)
	for _, c := range []struct {
		name string
		pc   *commonv1.PlayerClock
		held time.Duration
	}{
		// 100 ms main + 1 s period spent, 200 ms into the second period.
		{"in main time", &commonv1.PlayerClock{MainLeft: durationpb.New(100 * time.Millisecond), PeriodsLeft: 3, PeriodLeft: durationpb.New(time.Second)}, 1300 * time.Millisecond},
		// 500 ms of the first period spent, 200 ms into the second.
		{"in byo-yomi", &commonv1.PlayerClock{PeriodsLeft: 3, PeriodLeft: durationpb.New(500 * time.Millisecond), InByoYomi: true}, 700 * time.Millisecond},
	} {
		const clockLeft = 800 * time.Millisecond // of the second period, at the search's start
		got := thinkBudget(game(c.pc), second, c.held)
		t.Logf("%s, held %v: budget %v; the same clock read later: %v; %v left in a fresh period", c.name, c.held, got, later, clockLeft)
		if got < later/2 {
			t.Errorf("%s, held %v: budget %v where the clock has %v left of its next period (two periods left) and the same clock read later gets %v: the period lost while the snapshot was held is not counted, the AI searches %v for nothing", c.name, c.held, got, clockLeft, later, minBudget)
		}
	}
}
