package ai_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/aijobs"
	"github.com/palacehq/palace/pkg/apptest"
	"github.com/palacehq/palace/pkg/auth"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/logging"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/services/ai"
	"github.com/palacehq/palace/services/ai/internal/worker"
	"github.com/palacehq/palace/services/game"
)

// countingMover is the built-in engine, with a hook before each search
// and one that may answer in its place.
type countingMover struct {
	engine  *worker.Builtin
	calls   atomic.Int64
	before  func(call int64) error
	instead func(call int64) (rules.Move, bool)
}

func (m *countingMover) Move(ctx context.Context, v rules.Variant, start string, moves []rules.Move, level int, seed uint64, budget time.Duration) (rules.Move, uint64, error) {
	n := m.calls.Add(1)
	if m.before != nil {
		if err := m.before(n); err != nil {
			return rules.NoMove, 0, err
		}
	}
	if m.instead != nil {
		if mv, ok := m.instead(n); ok {
			return mv, 0, nil
		}
	}
	return m.engine.Move(ctx, v, start, moves, level, seed, budget)
}

// runWorker runs one worker with mover on the game's queue until the test
// ends; its jobs are claimed again 200 ms after a worker leaves them.
func runWorker(t *testing.T, g *aiGame, prefix string, mover worker.Mover) {
	t.Helper()
	q := aijobs.New(redistest.Client(t), prefix)
	q.ClaimAfter = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := &worker.Worker{Name: "w", Log: logging.Discard(), Queue: q, Games: g.games, Mover: mover}
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestAFailedSearchLeavesTheJobPending: a search that fails (an engine
// that crashed, say) leaves the AI to move, so its job must stay pending
// and be taken again, not be acknowledged and the game stranded.
func TestAFailedSearchLeavesTheJobPending(t *testing.T) {
	g, prefix := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 0)
	mover := &countingMover{engine: worker.NewBuiltin(4), before: func(call int64) error {
		if call == 1 {
			return errors.New("engine crashed")
		}
		return nil
	}}
	runWorker(t, g, prefix, mover)
	if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	g.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == 2 })
	if n := mover.calls.Load(); n != 2 {
		t.Fatalf("%d searches, want the failed one and its retry", n)
	}
}

// TestAMoveRefusedAsStaleIsSentAgainUnsearched: the game's version moves
// on while the AI thinks (here a draw offer; presence and clock events do
// the same), so its move is refused as stale. The position is unchanged:
// the move found is sent again at the new version, without a new search.
func TestAMoveRefusedAsStaleIsSentAgainUnsearched(t *testing.T) {
	g, prefix := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 0)
	mover := &countingMover{engine: worker.NewBuiltin(4), before: func(call int64) error {
		if call == 1 {
			_, err := g.games.OfferDraw(g.human, &gamev1.OfferDrawRequest{GameId: g.id, RequestId: "offer"})
			return err
		}
		return nil
	}}
	runWorker(t, g, prefix, mover)
	if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	st := g.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == 2 })
	if st.GetDrawOfferedBy() != commonv1.Side_SIDE_UNSPECIFIED {
		t.Fatalf("the AI's move left the draw offer of %v pending", st.GetDrawOfferedBy())
	}
	if n := mover.calls.Load(); n != 1 {
		t.Fatalf("%d searches for one position, want 1", n)
	}
}

// TestARefusedMoveLeavesTheJobPending: a move the game service refuses as
// illegal, in the position it was chosen for, is the mover's fault (a bug,
// or an engine's nonsense), not the job's end: the job stays pending and is
// taken again, and the AI moves.
func TestARefusedMoveLeavesTheJobPending(t *testing.T) {
	g, prefix := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 0)
	illegal, _ := rules.ParseMove("a1a2") // Red's chariot, on Black's turn
	mover := &countingMover{engine: worker.NewBuiltin(4)}
	mover.instead = func(call int64) (rules.Move, bool) { return illegal, call == 1 }
	runWorker(t, g, prefix, mover)
	if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	g.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == 2 })
	if n := mover.calls.Load(); n != 2 {
		t.Fatalf("%d searches, want the refused one and its retry", n)
	}
}

// TestAMoveRefusedAfterAnotherWorkersMoveIsVoid: two workers hold one job
// and choose different moves (an external engine need not repeat itself).
// The first commits; the second's move, under the same request id, is
// refused, and that refusal ends its job: the game has moved on.
func TestAMoveRefusedAfterAnotherWorkersMoveIsVoid(t *testing.T) {
	g, prefix := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 0)
	if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q := aijobs.New(redistest.Client(t), prefix)
	d, err := q.Next(ctx, "w", time.Second)
	if err != nil || d == nil {
		t.Fatalf("job %+v %v", d, err)
	}
	first := &worker.Worker{Name: "first", Log: logging.Discard(), Queue: q, Games: g.games, Mover: worker.NewBuiltin(4)}
	var firstMove string
	slow := &countingMover{engine: worker.NewBuiltin(4)}
	slow.instead = func(int64) (rules.Move, bool) {
		// The first worker finishes while this one thinks.
		if err := first.Handle(ctx, d.Job); err != nil {
			t.Errorf("first worker: %v", err)
		}
		st := g.waitFor(t, func(*gamev1.Game) bool { return true })
		firstMove = st.GetMoves()[1].GetMove().GetCoordinate()
		other, _ := rules.ParseMove("h10g8")
		if firstMove == other.String() {
			other, _ = rules.ParseMove("b10c8")
		}
		return other, true
	}
	second := &worker.Worker{Name: "second", Log: logging.Discard(), Queue: q, Games: g.games, Mover: slow}
	if err := second.Handle(ctx, d.Job); err != nil {
		t.Fatalf("second worker, refused after the first moved: %v; want the job void", err)
	}
	st := g.waitFor(t, func(*gamev1.Game) bool { return true })
	if len(st.GetMoves()) != 2 || st.GetMoves()[1].GetMove().GetCoordinate() != firstMove {
		t.Fatalf("moves %v, want the human's and the first worker's %s", st.GetMoves(), firstMove)
	}
}

// TestAJobWithAnUnknownCredentialStaysPending: a worker whose game
// service does not know the key of a job's credential (another deployment
// sharing the queue, or keys out of step) must leave the job to a worker
// whose game service does, not drop it and strand the game.
func TestAJobWithAnUnknownCredentialStaysPending(t *testing.T) {
	g, prefix := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 0)
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	other, err := auth.NewKeyring(auth.Key{ID: "other", Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := other.Sign(auth.Claims{Kind: auth.KindSeat, Subject: "ai", Game: g.id, Side: "second", IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	q := aijobs.New(redistest.Client(t), prefix)
	ctx := context.Background()
	if err := q.Enqueue(ctx, aijobs.Job{GameID: g.id, Version: 1, Kind: aijobs.KindMove, Side: "second", Token: tok, Level: 1}); err != nil {
		t.Fatal(err)
	}
	runWorker(t, g, prefix, &countingMover{engine: worker.NewBuiltin(4)})
	time.Sleep(time.Second) // the worker takes the job, and again after 200 ms
	if n, err := q.Depth(ctx); err != nil || n != 1 {
		t.Fatalf("queue depth %d (%v), want the job still pending", n, err)
	}
}

// TestAJobNoWorkerCouldPlayIsDeadLettered: a job whose credential the
// game service refuses for what it is (malformed, or a seat of no game),
// or whose game id no game can have, would be handed out after every
// claim timeout for ever: it is dead-lettered at once, where operators
// see it.
func TestAJobNoWorkerCouldPlayIsDeadLettered(t *testing.T) {
	g, prefix := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 0)
	q := aijobs.New(redistest.Client(t), prefix)
	ctx := context.Background()
	for _, j := range []aijobs.Job{
		{GameID: g.id, Version: 1, Kind: aijobs.KindMove, Side: "second", Token: "k1.not-a-credential", Level: 1},
		{GameID: "a}b", Version: 1, Kind: aijobs.KindMove, Side: "second", Token: "k1.not-a-credential", Level: 1},
	} {
		if err := q.Enqueue(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	runWorker(t, g, prefix, &countingMover{engine: worker.NewBuiltin(4)})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		depth, err := q.Depth(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dead, err := q.Dead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if depth == 0 && dead == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue depth %d, dead letters %d; want both jobs dead-lettered", depth, dead)
		}
	}
}

// TestAMoveTheGameServiceCouldNotTakeIsSentAgainUnsearched: the game
// service loses its Redis while the AI thinks, so the move is answered
// Unavailable. The worker waits for it to come back and sends the same
// move again, rather than leaving the job for the claim timeout and
// searching again.
func TestAMoveTheGameServiceCouldNotTakeIsSentAgainUnsearched(t *testing.T) {
	const keys = "k1:0202020202020202020202020202020202020202020202020202020202020202"
	gcfg := game.DefaultConfig()
	gcfg.SigningKeys = keys
	g, prefix := startAIGameWith(t, gcfg, commonv1.GameKind_GAME_KIND_XIANGQI, 0)
	// The worker's game service, another process of the same one, reaches
	// Redis through a proxy that the test cuts.
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	gcfg.KeyPrefix = prefix
	cut := gamev1.NewGameServiceClient(apptest.Start(t, proxy.Addr(), game.Bind(gcfg)))
	mover := &countingMover{engine: worker.NewBuiltin(4), before: func(call int64) error {
		if call == 1 {
			proxy.Cut()
			time.AfterFunc(time.Second, proxy.Restore)
		}
		return nil
	}}
	q := aijobs.New(redistest.Client(t), prefix)
	q.ClaimAfter = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := &worker.Worker{Name: "w", Log: logging.Discard(), Queue: q, Games: cut, Mover: mover}
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	g.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == 2 })
	if n := mover.calls.Load(); n != 1 {
		t.Fatalf("%d searches for one position, want 1: the move found is sent again once the game service is back", n)
	}
}

// TestAWorkerWhoseGameServiceIsGoneTakesNoJob: a worker whose game
// service stays out of reach past its outage wait takes no further job
// until it answers again, leaving the queue to workers whose game service
// does; once it is back, every AI move is made.
func TestAWorkerWhoseGameServiceIsGoneTakesNoJob(t *testing.T) {
	const keys = "k1:0303030303030303030303030303030303030303030303030303030303030303"
	gcfg := game.DefaultConfig()
	gcfg.SigningKeys = keys
	first, prefix := startAIGameWith(t, gcfg, commonv1.GameKind_GAME_KIND_XIANGQI, 0)
	games := []*aiGame{first}
	games = append(games, newAIGame(t, first.games, prefix+"second", commonv1.GameKind_GAME_KIND_XIANGQI))
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	gcfg.KeyPrefix = prefix
	cut := gamev1.NewGameServiceClient(apptest.Start(t, proxy.Addr(), game.Bind(gcfg)))
	proxy.Cut()
	rdb := redistest.Client(t)
	q := aijobs.New(rdb, prefix)
	// Longer than a job takes to fail (a call to a game service cut off
	// from Redis takes about a second to fail), as by default.
	q.ClaimAfter = 5 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := &worker.Worker{Name: "cut", Log: logging.Discard(), Queue: q, Games: cut, Mover: worker.NewBuiltin(4), OutageWait: 300 * time.Millisecond}
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	for i, g := range games {
		if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
			t.Fatalf("game %d: %v", i, err)
		}
	}
	// Long enough to fail the first job and take the second, without the
	// pause; not for the claim timeout to hand the first one back.
	time.Sleep(4500 * time.Millisecond)
	if c := groupConsumers(t, rdb, prefix)["cut"]; c.Pending != 1 {
		t.Fatalf("the worker whose game service is gone holds %d jobs; want only the one it failed", c.Pending)
	}
	proxy.Restore()
	for _, g := range games {
		g.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == 2 })
	}
}

// TestAJobOfAnUnknownSideIsRefused: handed a job whose side it cannot
// read (the queue dead-letters those it reads), a worker refuses it with
// an error, rather than take it for the first side's, find it void and
// drop it without a word.
func TestAJobOfAnUnknownSideIsRefused(t *testing.T) {
	g, prefix := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 0)
	if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q := aijobs.New(redistest.Client(t), prefix)
	d, err := q.Next(ctx, "w", time.Second)
	if err != nil || d == nil || d.Job.GameID != g.id {
		t.Fatalf("job %+v %v", d, err)
	}
	j := d.Job
	j.Side = "third"
	w := &worker.Worker{Name: "w", Log: logging.Discard(), Queue: q, Games: g.games, Mover: worker.NewBuiltin(4)}
	if err := w.Handle(ctx, j); err == nil || !strings.Contains(err.Error(), `unknown side "third"`) {
		t.Fatalf("Handle = %v, want an error naming the side", err)
	}
	if n := len(g.waitFor(t, func(*gamev1.Game) bool { return true }).GetMoves()); n != 1 {
		t.Fatalf("%d moves, want the human's alone", n)
	}
}

// TestAJobWhoseCredentialExpiredIsVoid: a job that outlived its seat's
// credential is done with (the game service refuses it with the expired
// reason, and no worker could play it), not left pending for ever.
func TestAJobWhoseCredentialExpiredIsVoid(t *testing.T) {
	const keys = "k1:0303030303030303030303030303030303030303030303030303030303030303"
	gcfg := game.DefaultConfig()
	gcfg.SigningKeys = keys
	g, prefix := startAIGameWith(t, gcfg, commonv1.GameKind_GAME_KIND_XIANGQI, 0)
	ring, err := auth.ParseKeyring(keys)
	if err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-2 * time.Hour)
	tok, err := ring.Sign(auth.Claims{Kind: auth.KindSeat, Subject: "ai", Game: g.id, Side: "second", IssuedAt: then.Unix(), ExpiresAt: then.Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	q := aijobs.New(redistest.Client(t), prefix)
	ctx := context.Background()
	if err := q.Enqueue(ctx, aijobs.Job{GameID: g.id, Version: 1, Kind: aijobs.KindMove, Side: "second", Token: tok, Level: 1}); err != nil {
		t.Fatal(err)
	}
	runWorker(t, g, prefix, &countingMover{engine: worker.NewBuiltin(4)})
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := q.Depth(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue depth %d, want the job acknowledged as void", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAForcedMoveIsPlayedWithoutASearch: with one legal move there is
// nothing to think about, and the worker plays it without asking its
// engine: an external engine given a movetime spends it all the same
// (Stockfish-family engines cut a forced move short only under their own
// time management), on the AI's clock.
func TestAForcedMoveIsPlayedWithoutASearch(t *testing.T) {
	prefix := redistest.Prefix(t)
	gcfg := game.DefaultConfig()
	gcfg.KeyPrefix = prefix
	cc := apptest.Start(t, redistest.Addr(t), game.Bind(gcfg), ai.Bind(aiConfig(prefix, 0)))
	games := gamev1.NewGameServiceClient(cc)
	// Red's general cannot move (the chariot holds both squares it could
	// reach): the pawn's a10b10 is Red's one legal move.
	resp, err := games.CreateGame(context.Background(), &gamev1.CreateGameRequest{
		RequestId: prefix + "forced", Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true,
		Start: &commonv1.Position{Fen: "P4k3/9/9/9/9/9/9/9/4r4/3K5 w - - 0 1"},
		Seats: []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, AiLevel: 10}, {Side: commonv1.Side_SIDE_SECOND, PlayerId: "human"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	g := &aiGame{games: games, id: resp.GetGameId(), human: context.Background()}
	if n := len(g.waitFor(t, func(*gamev1.Game) bool { return true }).GetLegalMoves()); n != 1 {
		t.Fatalf("the start has %d legal moves, want 1: the test proves nothing", n)
	}
	mover := &countingMover{engine: worker.NewBuiltin(4)}
	runWorker(t, g, prefix, mover)
	played := g.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == 1 })
	if mv := played.GetMoves()[0].GetMove().GetCoordinate(); mv != "a10b10" {
		t.Fatalf("the AI played %s, want a10b10", mv)
	}
	if n := mover.calls.Load(); n != 0 {
		t.Fatalf("the engine was asked %d times for the one legal move", n)
	}
}
