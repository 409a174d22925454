package worker

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/aijobs"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/rules"
)

// oneGameDown is a game service that reads every game (from its cache,
// say) but cannot commit to game "down" (its Redis Cluster shard lost, or
// failing over): MakeMove there answers Unavailable. Every other game's
// move is committed.
type oneGameDown struct {
	gamev1.GameServiceClient
	mu    sync.Mutex
	moved map[string]bool
	tries map[string]int
}

func (g *oneGameDown) GetGame(ctx context.Context, in *gamev1.GetGameRequest, _ ...grpc.CallOption) (*gamev1.GetGameResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	game := &gamev1.Game{
		GameId: in.GetGameId(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Status: commonv1.GameStatus_GAME_STATUS_ONGOING,
		Start: &commonv1.Position{Fen: rules.StartFEN(rules.Xiangqi)}, Turn: commonv1.Side_SIDE_FIRST, Version: 2,
	}
	if g.moved[in.GetGameId()] {
		game.Version, game.Turn = 3, commonv1.Side_SIDE_SECOND
	}
	return &gamev1.GetGameResponse{Game: game}, nil
}

func (g *oneGameDown) MakeMove(_ context.Context, in *gamev1.MakeMoveRequest, _ ...grpc.CallOption) (*gamev1.MakeMoveResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tries[in.GetGameId()]++
	if in.GetGameId() == "down" {
		return nil, status.Error(codes.Unavailable, "redis shard out of reach")
	}
	g.moved[in.GetGameId()] = true
	return &gamev1.MakeMoveResponse{}, nil
}

// TestAJobWhoseGameStaysUnavailablePinsNoWorker: a worker whose try of
// one job failed Unavailable past its outage wait, while its game service
// answers reads (the game's shard failing over), hands that job back and
// takes others: holding it to try it again at once, as after an outage of
// the whole game service, pinned the worker to it for ever, and no other
// game's AI moved.
func TestAJobWhoseGameStaysUnavailablePinsNoWorker(t *testing.T) {
	ctx := context.Background()
	q := aijobs.New(redistest.Client(t), redistest.Prefix(t))
	q.ClaimAfter = time.Hour // only this worker plays
	if err := q.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for _, id := range []string{"down", "up"} {
		if err := q.Enqueue(ctx, aijobs.Job{GameID: id, Version: 2, Kind: aijobs.KindMove, Side: "first", Level: 1, Token: "t", EnqueuedMs: now}); err != nil {
			t.Fatal(err)
		}
	}
	games := &oneGameDown{moved: map[string]bool{}, tries: map[string]int{}}
	w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Queue: q, Games: games, Mover: NewBuiltin(1),
		OutageWait: 200 * time.Millisecond}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(wctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		games.mu.Lock()
		moved := games.moved["up"]
		games.mu.Unlock()
		if moved {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	games.mu.Lock()
	defer games.mu.Unlock()
	t.Fatalf("game \"up\", whose game service commits at once, got no AI move in 8 s: the worker kept trying game \"down\" (%d MakeMove calls there, %d for \"up\")",
		games.tries["down"], games.tries["up"])
}
