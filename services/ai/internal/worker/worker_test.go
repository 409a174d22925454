package worker

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/palacehq/palace/pkg/aijobs"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
)

// lateCommit is a game service whose game shows the version a job was
// queued for only from its second read, as when a worker reads the job
// before the commit that queued it lands.
type lateCommit struct {
	gamev1.GameServiceClient
	mu    sync.Mutex
	reads []time.Time
	moved bool
}

func (g *lateCommit) GetGame(ctx context.Context, in *gamev1.GetGameRequest, _ ...grpc.CallOption) (*gamev1.GetGameResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reads = append(g.reads, time.Now())
	game := &gamev1.Game{
		GameId: in.GetGameId(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Status: commonv1.GameStatus_GAME_STATUS_ONGOING,
		Start: &commonv1.Position{Fen: rules.StartFEN(rules.Xiangqi)}, Turn: commonv1.Side_SIDE_FIRST, Version: 2,
	}
	if len(g.reads) == 1 {
		game.Version = 1
	}
	if g.moved {
		game.Version, game.Turn = 3, commonv1.Side_SIDE_SECOND
	}
	return &gamev1.GetGameResponse{Game: game}, nil
}

func (g *lateCommit) MakeMove(context.Context, *gamev1.MakeMoveRequest, ...grpc.CallOption) (*gamev1.MakeMoveResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.moved = true
	return &gamev1.MakeMoveResponse{}, nil
}

// TestAJobReadBeforeItsCommitIsPlayedWithoutAPause: the game service
// queues a job before the commit that makes it the AI's turn, and a
// worker waiting on the queue often reads the game before that commit
// shows. It looks again at once, not after a pause of 100 ms that every
// such reply waited, on the AI's clock too.
func TestAJobReadBeforeItsCommitIsPlayedWithoutAPause(t *testing.T) {
	games := &lateCommit{}
	w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Games: games, Mover: NewBuiltin(1)}
	job := aijobs.Job{GameID: "g", Version: 2, Kind: aijobs.KindMove, Side: "first", Level: 1}
	if err := w.Handle(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if !games.moved || len(games.reads) < 2 {
		t.Fatalf("moved %v after %d reads; want a move after the second", games.moved, len(games.reads))
	}
	if gap := games.reads[1].Sub(games.reads[0]); gap > 50*time.Millisecond {
		t.Fatalf("the game was read again %v after the commit was missed; want within 50ms", gap)
	}
}

// skewedServer is a game service whose clock (Redis TIME) is behind this
// host's by skew: the snapshot it answers is fresh, but as of its own
// time. The AI's clock runs, Fischer, with main time left.
type skewedServer struct {
	gamev1.GameServiceClient
	skew, main time.Duration
	mu         sync.Mutex
	moved      bool
}

func (g *skewedServer) GetGame(ctx context.Context, in *gamev1.GetGameRequest, _ ...grpc.CallOption) (*gamev1.GetGameResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	game := &gamev1.Game{
		GameId: in.GetGameId(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Status: commonv1.GameStatus_GAME_STATUS_ONGOING,
		Start: &commonv1.Position{Fen: rules.StartFEN(rules.Xiangqi)}, Turn: commonv1.Side_SIDE_FIRST, Version: 2,
		TimeControl: &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(g.main)}}},
		Clocks: &commonv1.ClockSnapshot{
			First: &commonv1.PlayerClock{MainLeft: durationpb.New(g.main)}, Second: &commonv1.PlayerClock{MainLeft: durationpb.New(g.main)},
			Running: commonv1.Side_SIDE_FIRST, AsOf: timestamppb.New(time.Now().Add(-g.skew)),
		},
	}
	if g.moved {
		game.Version, game.Turn = 3, commonv1.Side_SIDE_SECOND
	}
	return &gamev1.GetGameResponse{Game: game}, nil
}

func (g *skewedServer) MakeMove(context.Context, *gamev1.MakeMoveRequest, ...grpc.CallOption) (*gamev1.MakeMoveResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.moved = true
	return &gamev1.MakeMoveResponse{}, nil
}

// budgetMover records the think budget it was given.
type budgetMover struct {
	Mover
	budget time.Duration
}

func (m *budgetMover) Move(ctx context.Context, v rules.Variant, start string, moves []rules.Move, level int, seed uint64, budget time.Duration) (rules.Move, uint64, error) {
	m.budget = budget
	return m.Mover.Move(ctx, v, start, moves, level, seed, budget)
}

// TestTheAIsBudgetIgnoresTheHostsClock: the game's clocks are as of the
// game service's time (Redis TIME), which this host's clock may be set
// apart from. A fresh snapshot has had no time spent from it, whatever
// the two clocks say: a host running ahead must not cut the AI's search
// to nothing (nor one running behind lengthen it).
func TestTheAIsBudgetIgnoresTheHostsClock(t *testing.T) {
	want := time.Minute/movesLeft - moveMargin
	for _, skew := range []time.Duration{0, 55 * time.Second, -55 * time.Second} {
		games := &skewedServer{skew: skew, main: time.Minute}
		mover := &budgetMover{Mover: NewBuiltin(1)}
		w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Games: games, Mover: mover}
		job := aijobs.Job{GameID: "g", Version: 2, Kind: aijobs.KindMove, Side: "first", Level: 1}
		if err := w.Handle(context.Background(), job); err != nil {
			t.Fatal(err)
		}
		if !games.moved {
			t.Fatalf("skew %v: the AI did not move", skew)
		}
		if mover.budget < want-100*time.Millisecond || mover.budget > want {
			t.Errorf("server clock %v behind this host's: the AI was given %v to think, want about %v", skew, mover.budget, want)
		}
	}
}
