package worker

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/palacehq/palace/pkg/aijobs"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/rules"
)

// commitAt is a game service whose commit that queued the AI's job (at
// version 2) lands only at showAt: before, the game is at version 1.
type commitAt struct {
	gamev1.GameServiceClient
	showAt time.Time
	reads  atomic.Int64
	mu     sync.Mutex
	moved  bool
}

func (g *commitAt) GetGame(ctx context.Context, in *gamev1.GetGameRequest, _ ...grpc.CallOption) (*gamev1.GetGameResponse, error) {
	g.reads.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	game := &gamev1.Game{
		GameId: in.GetGameId(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Status: commonv1.GameStatus_GAME_STATUS_ONGOING,
		Start: &commonv1.Position{Fen: rules.StartFEN(rules.Xiangqi)}, Turn: commonv1.Side_SIDE_FIRST, Version: 1,
	}
	if time.Now().After(g.showAt) {
		game.Version = 2
	}
	if g.moved {
		game.Version, game.Turn = 3, commonv1.Side_SIDE_SECOND
	}
	return &gamev1.GetGameResponse{Game: game}, nil
}

func (g *commitAt) MakeMove(context.Context, *gamev1.MakeMoveRequest, ...grpc.CallOption) (*gamev1.MakeMoveResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.moved = true
	return &gamev1.MakeMoveResponse{}, nil
}

// TestALateCommitWithinTheGiveUpIsPlayedUnderMaxAttempts: the worker
// keeps a job whose commit has not shown for later looks until 2 minutes
// after it was queued (commitGiveUp), so that a late commit whose answer
// was lost still gets the AI's move. Those looks are no deliveries that
// MaxAttempts (--ai-job-attempts) counts: with 2, a commit that lands 25 s
// after its job still gets the AI's move. And only the first try polls
// the game for the commit; each later one looks once.
func TestALateCommitWithinTheGiveUpIsPlayedUnderMaxAttempts(t *testing.T) {
	if testing.Short() {
		t.Skip("about 35 s")
	}
	ctx := context.Background()
	q := aijobs.New(redistest.Client(t), redistest.Prefix(t))
	q.MaxAttempts = 2
	if err := q.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	games := &commitAt{showAt: start.Add(25 * time.Second)}
	job := aijobs.Job{GameID: "g", Version: 2, Kind: aijobs.KindMove, Side: "first", Level: 1, Token: "t", EnqueuedMs: start.UnixMilli()}
	if err := q.Enqueue(ctx, job); err != nil {
		t.Fatal(err)
	}
	w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Queue: q, Games: games, Mover: NewBuiltin(1)}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(wctx) }()
	defer func() { cancel(); <-done }()
	for time.Since(start) < 35*time.Second {
		games.mu.Lock()
		moved := games.moved
		games.mu.Unlock()
		if moved {
			// The first try's polling, 1 s at up to 10 a second, and a
			// look at each later one, a second or more apart.
			if n := games.reads.Load(); n > 60 {
				t.Fatalf("the game was read %d times for one job whose commit came late", n)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	dead, _ := q.Dead(ctx)
	t.Fatalf("a commit that landed 25 s after its job was queued (within the 2 minutes the worker promises) got no AI move; "+
		"dead letters %d, reads of the game %d", dead, games.reads.Load())
}
