package clock_test

import (
	"fmt"
	"testing"
	"time"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/clock"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// TestAPartialOutageStillFlagsOnTime: one game process (A) is cut off
// from Redis through Red's turn, while the other (B) serves the sweeper and
// announces Red's byo-yomi. Red's move, sent to A once Redis is back,
// excuses the outage, which moves the mark of what was announced past the
// move. Black's turn must still be swept at each milestone, and Black
// flagged on time: a wake-up set on a milestone the mark covers changed
// nothing when due, and the sweeper dropped the game's only entry.
func TestAPartialOutageStillFlagsOnTime(t *testing.T) {
	const keys = "k1:0101010101010101010101010101010101010101010101010101010101010101"
	lagOff := func(c *game.Config) {
		c.SigningKeys = keys
		c.LagMaxPerMove, c.LagBank, c.LagRefill = 0, 0, 0
	}
	direct := gametest.Start(t, lagOff)
	// Short, so that a dropped wake-up shows before Black's next milestone.
	startClockWith(t, direct, "", func(c *clock.Config) { c.StaleAfter = 500 * time.Millisecond })
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	cut := gametest.StartOn(t, proxy.Addr(), func(c *game.Config) {
		lagOff(c)
		c.KeyPrefix = direct.Config.KeyPrefix
	})
	tb := create(t, direct, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: byoyomi(3*time.Second, 5, time.Second)})
	tb.play(t, "h3e3", "h10g8", "h1g3")

	proxy.Blackhole()
	// Black spends its main time and half a period: in byo-yomi, 5 left.
	time.Sleep(3500 * time.Millisecond)
	g := tb.play(t, "b10c8")
	if !g.GetClocks().GetSecond().GetInByoYomi() {
		t.Fatalf("Black is not in byo-yomi: %v", g.GetClocks().GetSecond())
	}
	// B announces Red's byo-yomi, about 3 s into Red's turn.
	tb.waitFor(t, "Red's byo-yomi announced", func(now *gamev1.Game) bool { return now.GetVersion() > g.GetVersion() })
	proxy.Restore()

	onCut := &table{env: cut, id: tb.id, seats: tb.seats}
	req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "b1c3"}}
	var resp *gamev1.MakeMoveResponse
	for stop := time.Now().Add(endWithin); ; {
		var err error
		if resp, err = cut.Client.MakeMove(onCut.as(commonv1.Side_SIDE_FIRST), req); err == nil {
			break
		}
		if time.Now().After(stop) {
			t.Fatalf("Red's move on A after the outage: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	flag := deadlineOf(t, resp.GetGame()).Add(time.Millisecond)

	end := tb.waitEnded(t)
	if r := end.GetResult(); r.GetMethod() != commonv1.EndMethod_END_METHOD_TIMEOUT || r.GetWinner() != commonv1.Winner_WINNER_FIRST {
		t.Fatalf("result %v, want Black flagged", r)
	}
	if late := end.GetEndedAt().AsTime().Sub(flag); late < 0 || late > 3*time.Second {
		t.Fatalf("Black flagged %v after its flag instant", late)
	}
	// Red's turn is excused the outage. Black's may be excused too, a
	// little: the part of Red's commit held past a second (a reconnection
	// on a busy machine) ends the outage only at its answer, in Black's
	// turn.
	var redExcused time.Duration
	var excuses []string
	periods := 0
	for _, e := range tb.events(t) {
		c := e.GetClock()
		switch {
		case c.GetKind() == gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED:
			excuses = append(excuses, fmt.Sprintf("%v %v", c.GetSide(), c.GetExcused().AsDuration()))
			if c.GetSide() == commonv1.Side_SIDE_FIRST {
				redExcused = max(redExcused, c.GetExcused().AsDuration())
			}
		case c.GetKind() == gamev1.ClockEventKind_CLOCK_EVENT_KIND_PERIOD_USED && c.GetSide() == commonv1.Side_SIDE_SECOND:
			periods++
		}
	}
	if redExcused < 2*time.Second || periods != 4 {
		t.Fatalf("Red's turn excused %v (excuses %v), Black's periods used announced %d; want Red's turn excused at least 2s and all 4", redExcused, excuses, periods)
	}
}
