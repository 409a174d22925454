package worker

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
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
	games := &oneGameDown{moved: map[string]bool{}, tries: map[string]int{}}
	if tries := upMoves(t, games, games); tries >= 0 {
		t.Fatalf("game \"up\", whose game service commits at once, got no AI move in 8 s: the worker kept trying game \"down\" (%d calls there)", tries)
	}
}

// upMoves queues the AI's jobs of games "down" and "up" (of od), runs one
// worker on games, and returns -1 once "up" got its move, or after 8 s the
// calls made for "down".
func upMoves(t *testing.T, games gamev1.GameServiceClient, od *oneGameDown) int {
	t.Helper()
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
	w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Queue: q, Games: games, Mover: NewBuiltin(1),
		OutageWait: 200 * time.Millisecond}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(wctx) }()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		od.mu.Lock()
		moved := od.moved["up"]
		od.mu.Unlock()
		if moved {
			return -1
		}
	}
	od.mu.Lock()
	defer od.mu.Unlock()
	return od.tries["down"]
}

// shardsDown is a game service whose games "down…" sit on a Redis Cluster
// shard that is failing over: neither read nor moved, Unavailable; every
// other game (a made-up one included) answers.
type shardsDown struct{ oneGameDown }

func (g *shardsDown) GetGame(ctx context.Context, in *gamev1.GetGameRequest, opts ...grpc.CallOption) (*gamev1.GetGameResponse, error) {
	if strings.HasPrefix(in.GetGameId(), "down") {
		return nil, status.Error(codes.Unavailable, "redis shard out of reach")
	}
	return g.oneGameDown.GetGame(ctx, in, opts...)
}

// TestAJobWhoseGameCannotBeReadPinsNoWorker: a job whose game cannot be
// read either (its Redis Cluster shard failing over) held the worker, once
// for as long as the shard was down, then for the outage wait (20 s by
// default) at each of its deliveries: with two such jobs handed back in
// turn, games on healthy shards queued behind waited minutes on their
// AI's clock. A game that does not exist, answered NotFound, tells the
// worker at the first Unavailable that the service reads other games: the
// job is handed back at once. Scaled down: an outage wait of 2 s, two
// jobs of the failing shard ahead of "up".
func TestAJobWhoseGameCannotBeReadPinsNoWorker(t *testing.T) {
	ctx := context.Background()
	q := aijobs.New(redistest.Client(t), redistest.Prefix(t))
	q.ClaimAfter = time.Hour // only this worker plays
	if err := q.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for _, id := range []string{"down1", "down2", "up"} {
		if err := q.Enqueue(ctx, aijobs.Job{GameID: id, Version: 2, Kind: aijobs.KindMove, Side: "first", Level: 1, Token: "t", EnqueuedMs: now}); err != nil {
			t.Fatal(err)
		}
	}
	games := &shardsDown{oneGameDown{moved: map[string]bool{}, tries: map[string]int{}}}
	const outageWait = 2 * time.Second
	w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Queue: q, Games: games, Mover: NewBuiltin(1),
		OutageWait: outageWait}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	start := time.Now()
	go func() { defer close(done); w.Run(wctx) }()
	defer func() { cancel(); <-done }()
	for time.Now().Before(start.Add(10 * time.Second)) {
		games.mu.Lock()
		moved := games.moved["up"]
		games.mu.Unlock()
		if moved {
			if took := time.Since(start); took > outageWait {
				t.Fatalf("game \"up\", on a healthy shard, got its AI move %v after it was queued: the worker spent the outage wait (%v) on the jobs of the failing shard", took.Round(100*time.Millisecond), outageWait)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	games.mu.Lock()
	defer games.mu.Unlock()
	t.Fatalf("game \"up\", on a healthy shard, got no AI move in 10 s: the worker took the two jobs of the failing shard in turn, each costing the outage wait (%v)", outageWait)
}

// notReady is the built-in engine, not ready until ready is closed.
type notReady struct {
	*Builtin
	ready chan struct{}
	calls atomic.Int64
}

func (m *notReady) Ready() <-chan struct{} { return m.ready }

func (m *notReady) Move(ctx context.Context, v rules.Variant, start string, moves []rules.Move, level int, seed uint64, budget time.Duration) (rules.Move, uint64, error) {
	m.calls.Add(1)
	return m.Builtin.Move(ctx, v, start, moves, level, seed, budget)
}

// TestAWorkerTakesNoJobBeforeItsEngineIsReady: a built-in engine touches
// its table when it is made, seconds for gigabytes; a worker that took a
// job meanwhile budgeted its move from the clock as it stood, then waited
// for the table on top of that budget (a lost byo-yomi period). It takes
// its first job once its engine is ready, reading the clock then.
func TestAWorkerTakesNoJobBeforeItsEngineIsReady(t *testing.T) {
	ctx := context.Background()
	q := aijobs.New(redistest.Client(t), redistest.Prefix(t))
	if err := q.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, aijobs.Job{GameID: "up", Version: 2, Kind: aijobs.KindMove, Side: "first", Level: 1, Token: "t", EnqueuedMs: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	games := &oneGameDown{moved: map[string]bool{}, tries: map[string]int{}}
	mover := &notReady{Builtin: NewBuiltin(1), ready: make(chan struct{})}
	w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Queue: q, Games: games, Mover: mover}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(wctx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(300 * time.Millisecond)
	if n := mover.calls.Load(); n != 0 {
		t.Fatalf("the worker asked its engine %d times before it was ready", n)
	}
	close(mover.ready)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		games.mu.Lock()
		moved := games.moved["up"]
		games.mu.Unlock()
		if moved {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no move within 5 s of the engine being ready")
		}
	}
}
