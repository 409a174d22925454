package ai_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/aijobs"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// slowAnswerAt is the game service as a worker reaches it, whose answer
// to a read of the game at ply plies (the AI to move) comes back delay
// late, once armed: a game service that stalled after its read (a GC or
// CPU pause, a busy process), as stallAfterLoad has it.
type slowAnswerAt struct {
	gamev1.GameServiceClient
	plies   int
	delay   time.Duration
	armed   atomic.Bool
	delayed atomic.Int32
}

func (s *slowAnswerAt) GetGame(ctx context.Context, in *gamev1.GetGameRequest, opts ...grpc.CallOption) (*gamev1.GetGameResponse, error) {
	r, err := s.GameServiceClient.GetGame(ctx, in, opts...)
	if err == nil && s.armed.Load() && len(r.GetGame().GetMoves()) == s.plies && r.GetGame().GetStatus() == commonv1.GameStatus_GAME_STATUS_ONGOING {
		s.delayed.Add(1)
		time.Sleep(s.delay)
	}
	return r, err
}

// TestTheAIKeepsItsLastPeriodAfterASlowRead: byo-yomi, 100 ms of main
// time and one period of 1 s. The AI (level 10, which uses all the time it
// is given) gets its turn with its 100 ms of main time untouched, and the
// worker's read of the game answers 700 ms late: 400 ms are left to the
// AI's flag. The worker counted the time it held the snapshot against
// main time but still budgeted three quarters of a whole period (450 ms):
// the AI moved after its last period ran out, and lost on time.
func TestTheAIKeepsItsLastPeriodAfterASlowRead(t *testing.T) {
	prefix := redistest.Prefix(t)
	games := startHookedGames(t, prefix, nil)
	g := createAIGame(t, games, &gamev1.CreateGameRequest{
		RequestId: prefix + "create", Kind: commonv1.GameKind_GAME_KIND_XIANGQI,
		TimeControl: &commonv1.TimeControl{Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{
			MainTime: durationpb.New(100 * time.Millisecond), Periods: 1, PeriodTime: durationpb.New(time.Second)}}},
		Seats: []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, PlayerId: "human"}, {Side: commonv1.Side_SIDE_SECOND, AiLevel: 10}},
	})
	slow := &slowAnswerAt{GameServiceClient: games, plies: 3, delay: 700 * time.Millisecond}
	q := aijobs.New(redistest.Client(t), prefix)
	q.ClaimAfter = 30 * time.Second
	startOneWorker(t, q, slow)

	g.play(t, 1) // before the clock runs: the first-move rule
	slow.armed.Store(true)
	// The clock runs; the AI's 100 ms of main time are untouched till its turn.
	st := g.waitFor(t, func(x *gamev1.Game) bool { return x.GetTurn() == commonv1.Side_SIDE_FIRST })
	if _, err := games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: g.id + "-3", Move: st.GetLegalMoves()[0]}); err != nil {
		t.Fatal(err)
	}
	end := g.waitForWithin(t, 10*time.Second, "the AI's move or the game's end", func(x *gamev1.Game) bool {
		return len(x.GetMoves()) == 4 || x.GetStatus() == commonv1.GameStatus_GAME_STATUS_ENDED
	})
	if slow.delayed.Load() == 0 {
		t.Fatal("no read of the game was slowed")
	}
	if end.GetResult().GetMethod() == commonv1.EndMethod_END_METHOD_TIMEOUT {
		t.Fatalf("the AI lost on time (%v): with 100 ms of main time and a 1 s period, its read answered 700 ms late, it was budgeted 450 ms, not what was left of the period", end.GetResult())
	}
	m := end.GetMoves()[3]
	t.Logf("the AI moved %v after the human; clocks %v", m.GetPlayedAt().AsTime().Sub(end.GetMoves()[2].GetPlayedAt().AsTime()), m.GetClocks().GetSecond())
}
