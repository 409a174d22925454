package ai_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/aijobs"
	"github.com/palacehq/palace/pkg/apptest"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/logging"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/ai"
	"github.com/palacehq/palace/services/ai/internal/worker"
	"github.com/palacehq/palace/services/game"
)

// TestAFailedSearchIsRetriedWithinTheAIsTime: when the AI's engine fails
// once (an external engine that crashed, hung or answered nonsense, and is
// replaced at once) while the AI's clock runs, the job is tried again
// within moments by a worker whose lease is alive, not after
// --ai-claim-after (scaled down to 4 s here, against 3 s on the AI's
// clock): one passing failure does not lose the AI the game on time.
func TestAFailedSearchIsRetriedWithinTheAIsTime(t *testing.T) {
	prefix := redistest.Prefix(t)
	gcfg := game.DefaultConfig()
	gcfg.KeyPrefix = prefix
	cc := apptest.Start(t, redistest.Addr(t), game.Bind(gcfg), ai.Bind(aiConfig(prefix, 0)))
	games := gamev1.NewGameServiceClient(cc)
	g := createAIGame(t, games, &gamev1.CreateGameRequest{
		RequestId: prefix + "create", Kind: commonv1.GameKind_GAME_KIND_XIANGQI,
		TimeControl: &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(3 * time.Second), Increment: durationpb.New(time.Second)}}},
		Seats:       []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, PlayerId: "human"}, {Side: commonv1.Side_SIDE_SECOND, AiLevel: 1}},
	})
	// The engine fails on the AI's second move, once the clocks run.
	mover := &countingMover{engine: worker.NewBuiltin(4), before: func(call int64) error {
		if call == 2 {
			return errors.New("external engine failed, replacing it: engine exited")
		}
		return nil
	}}
	q := aijobs.New(redistest.Client(t), prefix)
	q.ClaimAfter = 4 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := &worker.Worker{Name: "w", Log: logging.Discard(), Queue: q, Games: games, Mover: mover}
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	for _, ply := range []int{0, 2} {
		st := g.waitFor(t, func(x *gamev1.Game) bool {
			return x.GetTurn() == commonv1.Side_SIDE_FIRST && len(x.GetMoves()) == ply
		})
		if _, err := games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: g.id + "-h" + string(rune('0'+ply)), Move: st.GetLegalMoves()[0]}); err != nil {
			t.Fatal(err)
		}
	}
	failedAt := time.Now()
	end := g.waitFor(t, func(x *gamev1.Game) bool {
		return len(x.GetMoves()) == 4 || x.GetStatus() == commonv1.GameStatus_GAME_STATUS_ENDED
	})
	if end.GetStatus() == commonv1.GameStatus_GAME_STATUS_ENDED {
		t.Fatalf("after one failed search the AI's game ended %v after %d plies, %v after the failure (searches: %d); want its move within its 3 s",
			end.GetResult().GetMethod(), len(end.GetMoves()), time.Since(failedAt).Round(100*time.Millisecond), mover.calls.Load())
	}
}
