package ai_test

import (
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/aijobs"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestAJobsAgeIsMeasuredByRedisClock: the game service dates an AI job by
// Redis' clock, the one every process goes by, and the worker measures
// the job's age by it too, not by its host's clock, when it finds the
// job's commit not shown yet (it landed 300 ms after the job). Measured by
// a host clock 3 minutes ahead, the job looked void and was dropped: the
// AI never replied. 40 s ahead, with the default claim timeout, it looked
// 40 s old and was postponed a quarter of that: the AI replied 10 s late,
// on its clock.
func TestAJobsAgeIsMeasuredByRedisClock(t *testing.T) {
	for _, skew := range []time.Duration{3 * time.Minute, 40 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			prefix := redistest.Prefix(t)
			apart := redistest.ClockApart(-skew)
			// The worker, blocked on its queue, reads the job before its
			// commit lands, as it often does.
			stall := &stallAfterJob{stream: prefix + "{ai}:jobs", stall: 300 * time.Millisecond}
			g := newAIGame(t, startHookedGames(t, prefix, nil, apart, stall), prefix+"create", commonv1.GameKind_GAME_KIND_XIANGQI)
			rdb := redistest.Client(t)
			rdb.AddHook(apart)
			q := aijobs.New(rdb, prefix)
			q.ClaimAfter = 30 * time.Second // --ai-claim-after's default
			startOneWorker(t, q, g.games)

			stall.armed.Store(true)
			start := time.Now()
			if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
				t.Fatal(err)
			}
			waitForAIReply(t, g, prefix, "the human's move")
			if took := time.Since(start); took > 4*time.Second {
				t.Fatalf("the AI replied %v after the human's move, whose commit landed 300 ms after its job; want within a second or two", took.Round(time.Millisecond))
			}
		})
	}
}
