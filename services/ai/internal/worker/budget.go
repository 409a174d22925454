package worker

import (
	"time"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// An AI seat plays on the game's clock like any player: its level's
// search (up to about a second, 5 s at most for level 10) must fit what
// the clock leaves it, or a fast game is lost on time. The budget is a
// share of the time left: a thirtieth of the main time plus most of the
// increment (Fischer), most of the current period once in byo-yomi, half
// the time left for a first move; less a margin for the move to reach the
// game service, which credits an AI no lag.

const (
	// moveMargin is kept back for the move's round trip and commit.
	moveMargin = 300 * time.Millisecond
	// minBudget lets even a flagging AI search a little.
	minBudget = 20 * time.Millisecond
	// movesLeft is how many moves main time is spread over.
	movesLeft = 30
)

// thinkBudget is how long the AI on side may think in g, whose snapshot
// it has held for held by this host's clock (since it asked for it); 0
// when no clock bounds it. The snapshot's instants are the game service's
// (Redis TIME), which this host's clock may be set apart from: they are
// compared only with each other, never with this host's time, or a host
// running ahead would cut every search short by as much.
func thinkBudget(g *gamev1.Game, side commonv1.Side, held time.Duration) time.Duration {
	c := g.GetClocks()
	if c == nil {
		return 0
	}
	held = max(held, 0)
	var spent time.Duration
	if c.GetRunning() == side {
		spent = held
	}
	var budget time.Duration
	switch {
	case c.GetFirstMoveDeadline() != nil:
		budget = (c.GetFirstMoveDeadline().AsTime().Sub(c.GetAsOf().AsTime()) - held) / 2
	case c.GetRunning() != side && c.GetRunning() != commonv1.Side_SIDE_UNSPECIFIED:
		return 0 // not its turn on the clock: nothing to budget
	default:
		pc := c.GetFirst()
		if side == commonv1.Side_SIDE_SECOND {
			pc = c.GetSecond()
		}
		tc := g.GetTimeControl()
		switch {
		case tc.GetFischer() != nil:
			left := pc.GetMainLeft().AsDuration() - spent
			budget = left/movesLeft + tc.GetFischer().GetIncrement().AsDuration()*3/4
			budget = min(budget, left/2)
		default:
			budget = byoYomiBudget(pc, tc.GetByoYomi().GetPeriodTime().AsDuration(), spent)
		}
	}
	return max(budget-moveMargin, minBudget)
}

// byoYomiBudget is the think time of a byo-yomi (or sudden death) seat
// whose clock pc has run spent since its snapshot: spent as the clock
// spends it, main time first, then the current period, then whole fresh
// periods while others remain; a thirtieth of main time left, and at
// least three quarters of what is left of the period it then stands in,
// which the move may not lose.
func byoYomiBudget(pc *commonv1.PlayerClock, period, spent time.Duration) time.Duration {
	main := pc.GetMainLeft().AsDuration()
	if pc.GetInByoYomi() {
		main = 0
	}
	main -= spent
	budget := max(main, 0) / movesLeft
	left, periods := pc.GetPeriodLeft().AsDuration(), pc.GetPeriodsLeft()
	over := max(-main, 0)
	for ; over >= left && periods > 1 && period > 0; periods-- {
		over -= left
		left = period
	}
	if periods > 0 {
		budget = max(budget, (left-over)*3/4)
	}
	return budget
}
