package ai_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/aijobs"
	"github.com/palacehq/palace/pkg/apptest"
	aiv1 "github.com/palacehq/palace/pkg/gen/palace/ai/v1"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/logging"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/pkg/uci"
	"github.com/palacehq/palace/services/ai"
	"github.com/palacehq/palace/services/ai/internal/handler"
	"github.com/palacehq/palace/services/ai/internal/worker"
	"github.com/palacehq/palace/services/game"
)

const xiangqiMateIn1 = "4k4/R8/9/9/9/9/9/9/9/1R1K5 w - - 0 1"

// TestMain lets this test binary stand in for an external UCI engine: run
// with PALACE_TEST_UCI_ENGINE=1, it is Palace's engine on stdin and stdout.
func TestMain(m *testing.M) {
	if os.Getenv("PALACE_TEST_UCI_ENGINE") == "1" {
		if err := uci.Run(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// selfEngine is an external engine for the workers: this test binary
// behind a script that notes the process id of each start, which
// started lists.
func selfEngine(t *testing.T) (script string, started func() []string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	script = filepath.Join(dir, "engine")
	body := fmt.Sprintf("#!/bin/sh\necho $$ >> %q\nPALACE_TEST_UCI_ENGINE=1 exec %q\n", pids, self)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, func() []string {
		t.Helper()
		b, err := os.ReadFile(pids)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(b))
	}
}

// play makes the human's move at ply (its first legal one) and waits for
// the AI's reply.
func (g *aiGame) play(t *testing.T, ply int) {
	t.Helper()
	st := g.waitFor(t, func(x *gamev1.Game) bool { return x.GetTurn() == commonv1.Side_SIDE_FIRST })
	if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: fmt.Sprintf("%s-%d", g.id, ply), Move: st.GetLegalMoves()[0]}); err != nil {
		t.Fatal(err)
	}
	g.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == ply+1 })
}

// TestWorkerUsesAnExternalUCIEngine configures the worker with an engine
// binary (selfEngine) and plays against it: the AI's replies must come
// from that process.
func TestWorkerUsesAnExternalUCIEngine(t *testing.T) {
	script, started := selfEngine(t)
	g, _ := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 1, func(c *ai.Config) { c.UCIEngine = script })
	g.play(t, 1)
	g.play(t, 3)
	if len(started()) == 0 {
		t.Fatal("the external engine never started")
	}
}

// TestWorkerRestartsADeadUCIEngine kills the external engine between two
// of the AI's moves: the worker starts a new one, and the AI plays on.
func TestWorkerRestartsADeadUCIEngine(t *testing.T) {
	script, started := selfEngine(t)
	g, _ := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 1, func(c *ai.Config) { c.UCIEngine = script })
	g.play(t, 1)
	first := started()
	if len(first) != 1 {
		t.Fatalf("engines started: %v, want one", first)
	}
	pid, err := strconv.Atoi(first[0])
	if err != nil {
		t.Fatal(err)
	}
	engine, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.Kill(); err != nil {
		t.Fatal(err)
	}
	g.play(t, 3)
	if n := len(started()); n != 2 {
		t.Fatalf("%d engines started, want a second one after the first died", n)
	}
}

// TestWorkerReplacesAHungUCIEngine: an engine that never answers "go" is
// given up after --ai-uci-move-timeout and replaced, instead of holding
// its worker for ever.
func TestWorkerReplacesAHungUCIEngine(t *testing.T) {
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	script := filepath.Join(dir, "engine")
	// A UCI engine that starts and answers readiness, then never moves.
	body := fmt.Sprintf(`#!/bin/sh
echo started >> %q
while read -r line; do
  case "$line" in
    uci) echo "id name hung"; echo uciok ;;
    isready) echo readyok ;;
    quit) exit 0 ;;
  esac
done
`, starts)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	g, _ := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 1, func(c *ai.Config) {
		c.UCIEngine, c.UCIMoveTimeout = script, 300*time.Millisecond
	})
	if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: g.id + "-1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	// The worker starts a new engine at once, and the job stays pending
	// for its retry.
	// The hung engine is stopped without waiting for its answer (pkg/uci),
	// and given 2 s to quit when the worker closes it.
	moved := time.Now()
	deadline := moved.Add(15 * time.Second)
	for {
		b, _ := os.ReadFile(starts)
		if n := strings.Count(string(b), "started"); n >= 2 {
			t.Logf("a new engine %v after the human's move", time.Since(moved))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine starts: %q; want a new engine once the hung one timed out", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWorkerReplacesAUCIEngineThatAnswersNonsense: an engine that answers
// an illegal move, or "(none)" where there are moves, is replaced like a
// dead one and its job stays pending. Acknowledged, the job would leave
// the game on the AI's turn for ever; once the engine is a sound one, the
// AI plays.
func TestWorkerReplacesAUCIEngineThatAnswersNonsense(t *testing.T) {
	for _, best := range []string{"a1a2", "(none)"} {
		t.Run(best, func(t *testing.T) {
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			starts := filepath.Join(dir, "starts")
			script := filepath.Join(dir, "engine")
			writeScript(t, script, fmt.Sprintf(`#!/bin/sh
echo started >> %q
while read -r l; do
  case "$l" in
    uci) echo uciok ;;
    isready) echo readyok ;;
    go*) echo 'bestmove %s' ;;
    quit) exit 0 ;;
  esac
done
`, starts, best))
			g, prefix := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 1, func(c *ai.Config) { c.UCIEngine = script })
			q := aijobs.New(redistest.Client(t), prefix)
			if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: g.id + "-1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
				t.Fatal(err)
			}
			// One engine is started with the service; it fails the job, and
			// the worker starts another at once.
			moved := time.Now()
			deadline := moved.Add(10 * time.Second)
			for {
				b, _ := os.ReadFile(starts)
				if strings.Count(string(b), "started") >= 2 {
					break
				}
				if time.Now().After(deadline) {
					st := g.waitFor(t, func(*gamev1.Game) bool { return true })
					depth, _ := q.Depth(context.Background())
					t.Fatalf("engine starts %q; game: %d moves, %v to move, %d jobs queued; want the engine replaced and the job pending",
						b, len(st.GetMoves()), st.GetTurn(), depth)
				}
				time.Sleep(50 * time.Millisecond)
			}
			st := g.waitFor(t, func(*gamev1.Game) bool { return true })
			if len(st.GetMoves()) != 1 || st.GetTurn() != commonv1.Side_SIDE_SECOND {
				t.Fatalf("after the engine's %q: %d moves, %v to move; want the AI still to move", best, len(st.GetMoves()), st.GetTurn())
			}
			if n, err := q.Depth(context.Background()); err != nil || n != 1 {
				t.Fatalf("%d jobs queued (%v), want the AI's job still pending", n, err)
			}
			t.Logf("engine replaced %v after the human's move", time.Since(moved))
			// A sound engine in its place: the pending job is played.
			writeScript(t, script, fmt.Sprintf("#!/bin/sh\necho started >> %q\nPALACE_TEST_UCI_ENGINE=1 exec %q\n", starts, self))
			g.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == 2 })
			t.Logf("the AI played %v after the human's move", time.Since(moved))
		})
	}
}

// writeScript puts an executable script at path, atomically, so that an
// engine being started meanwhile runs the old one or the new one whole.
func writeScript(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func aiConfig(prefix string, workers int) ai.Config {
	return ai.Config{KeyPrefix: prefix, Workers: workers, Engines: 2, MaxWaiting: 64, HashMB: 4, ClaimAfter: time.Second}
}

// TestAWaitingCallThatGivesUpFreesItsPlace: a call waiting for a busy
// engine ends with its deadline and leaves its place to the next caller,
// who waits in turn rather than being refused.
func TestAWaitingCallThatGivesUpFreesItsPlace(t *testing.T) {
	cfg := aiConfig(redistest.Prefix(t), 0)
	cfg.Engines, cfg.MaxWaiting = 1, 1
	c := aiv1.NewAIServiceClient(apptest.Start(t, redistest.Addr(t), ai.Bind(cfg)))
	busy, stop := context.WithCancel(context.Background())
	defer stop()
	long, err := c.Analyze(busy, &aiv1.AnalyzeRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Limits: &aiv1.SearchLimits{MovetimeMs: 60000}})
	if err == nil {
		_, err = long.Recv() // its first depth: the engine is taken
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := c.BestMove(ctx, &aiv1.BestMoveRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Level: 1})
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("call %d, waiting for the busy engine: %v, want DeadlineExceeded", i, err)
		}
		time.Sleep(100 * time.Millisecond) // for the server to see the call end
	}
}

// TestBusyEnginesBoundTheWaiting: with every engine searching, calls wait
// for one up to --ai-max-waiting; one more is refused at once, and the
// waiting call gets its answer once an engine is free.
func TestBusyEnginesBoundTheWaiting(t *testing.T) {
	cfg := aiConfig(redistest.Prefix(t), 0)
	cfg.Engines, cfg.MaxWaiting = 1, 1
	c := aiv1.NewAIServiceClient(apptest.Start(t, redistest.Addr(t), ai.Bind(cfg)))
	busy, stop := context.WithCancel(context.Background())
	defer stop()
	long, err := c.Analyze(busy, &aiv1.AnalyzeRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Limits: &aiv1.SearchLimits{MovetimeMs: 60000}})
	if err == nil {
		_, err = long.Recv() // its first depth: the engine is taken
	}
	if err != nil {
		t.Fatal(err)
	}
	// Two calls come while the engine is busy: one waits, the other is
	// refused at once, whichever came first.
	answers := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := c.BestMove(context.Background(), &aiv1.BestMoveRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Level: 1})
			answers <- err
		}()
	}
	select {
	case err := <-answers:
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "all 1 engines are searching and 1 calls wait") {
			t.Fatalf("a call beyond the waiting one: %v, want ResourceExhausted saying why", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("neither call was refused while the engine was busy and one call waited")
	}
	select {
	case err := <-answers:
		t.Fatalf("the waiting call ended while the engine was busy: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	stop()
	select {
	case err := <-answers:
		if err != nil {
			t.Fatalf("the waiting call, once the engine was free: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call got no engine once the search ended")
	}
}

func TestBestMove(t *testing.T) {
	c := aiv1.NewAIServiceClient(apptest.Start(t, redistest.Addr(t), ai.Bind(aiConfig(redistest.Prefix(t), 0))))
	ctx := context.Background()
	r, err := c.BestMove(ctx, &aiv1.BestMoveRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Start: &commonv1.Position{Fen: xiangqiMateIn1}, Level: 10})
	if err != nil {
		t.Fatal(err)
	}
	// b1b10 mates; a9f9 leaves Black without a move, which loses too.
	g, _ := rules.NewGame(rules.Xiangqi, xiangqiMateIn1)
	m, _ := rules.ParseMove(r.GetMove().GetCoordinate())
	if _, err := g.Play(m); err != nil || g.Outcome().Winner != rules.FirstWins || r.GetMateIn() != 1 {
		t.Fatalf("best move %v (mate %d) does not win at once: %v %v", r.GetMove(), r.GetMateIn(), g.Outcome(), err)
	}
	// A client shows the line and the effort behind the move.
	if pv := r.GetPv(); len(pv) == 0 || pv[0].GetCoordinate() != r.GetMove().GetCoordinate() || r.GetDepth() == 0 || r.GetNodes() == 0 {
		t.Fatalf("best move %v with pv %v, depth %d, %d nodes; want a pv starting with the move, a depth and nodes", r.GetMove(), pv, r.GetDepth(), r.GetNodes())
	}
	tests := []struct {
		name string
		req  *aiv1.BestMoveRequest
		want codes.Code
	}{
		{name: "no level and no limits", req: &aiv1.BestMoveRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI}, want: codes.InvalidArgument},
		{name: "level out of range", req: &aiv1.BestMoveRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Level: 11}, want: codes.InvalidArgument},
		{name: "bad fen", req: &aiv1.BestMoveRequest{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Start: &commonv1.Position{Fen: "x"}, Level: 1}, want: codes.InvalidArgument},
		{name: "illegal move", req: &aiv1.BestMoveRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Moves: []*commonv1.Move{{Coordinate: "a1a9"}}, Level: 1}, want: codes.InvalidArgument},
		{name: "game over by two passes", req: &aiv1.BestMoveRequest{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Moves: []*commonv1.Move{{Coordinate: "e2e2"}, {Coordinate: "e9e9"}}, Level: 1}, want: codes.FailedPrecondition},
		{name: "game already over", req: &aiv1.BestMoveRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Start: &commonv1.Position{Fen: xiangqiMateIn1}, Moves: []*commonv1.Move{{Coordinate: "b1b10"}}, Level: 1}, want: codes.FailedPrecondition},
		{name: "too deep", req: &aiv1.BestMoveRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Limits: &aiv1.SearchLimits{Depth: 99}}, want: codes.InvalidArgument},
		{name: "too many nodes", req: &aiv1.BestMoveRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Limits: &aiv1.SearchLimits{Nodes: handler.MaxNodes + 1}}, want: codes.InvalidArgument},
		{name: "too long", req: &aiv1.BestMoveRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Limits: &aiv1.SearchLimits{MovetimeMs: uint32(handler.MaxMoveTime.Milliseconds()) + 1}}, want: codes.InvalidArgument},
		{name: "no game kind", req: &aiv1.BestMoveRequest{Level: 1}, want: codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := c.BestMove(ctx, tt.req); status.Code(err) != tt.want {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestAnalyzeStreamsDepths(t *testing.T) {
	c := aiv1.NewAIServiceClient(apptest.Start(t, redistest.Addr(t), ai.Bind(aiConfig(redistest.Prefix(t), 0))))
	infos, best := analyze(t, c, &aiv1.AnalyzeRequest{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Limits: &aiv1.SearchLimits{Depth: 4}})
	var depths []uint32
	for _, i := range infos {
		depths = append(depths, i.GetDepth())
	}
	if !slices.Equal(depths, []uint32{1, 2, 3, 4}) || best.GetMove().GetCoordinate() == "" {
		t.Fatalf("depths %v, best %v; want one message per depth, 1 to 4, then the best move", depths, best)
	}
}

// TestBestMoveScoresFromTheMoversView: score_cp is the position's value
// for the side to move: a chariot up is well ahead, a chariot down well
// behind.
func TestBestMoveScoresFromTheMoversView(t *testing.T) {
	c := aiv1.NewAIServiceClient(apptest.Start(t, redistest.Addr(t), ai.Bind(aiConfig(redistest.Prefix(t), 0))))
	// The Xiangqi start without Black's a10 chariot.
	const fen = "1nbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR %s - - 0 1"
	for _, tc := range []struct {
		turn  string
		ahead bool
		mover string
	}{{"w", true, "Red"}, {"b", false, "Black"}} {
		r, err := c.BestMove(context.Background(), &aiv1.BestMoveRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Start: &commonv1.Position{Fen: fmt.Sprintf(fen, tc.turn)}, Limits: &aiv1.SearchLimits{Depth: 3}})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.GetScoreCp(); (tc.ahead && got < 300) || (!tc.ahead && got > -300) {
			t.Errorf("%s to move, a chariot %s: score %d cp", tc.mover, map[bool]string{true: "up", false: "down"}[tc.ahead], got)
		}
	}
}

type aiGame struct {
	games gamev1.GameServiceClient
	id    string
	human context.Context
}

// startAIGame runs a game service and AI workers in one process and
// creates a game where the AI plays the second seat.
func startAIGame(t *testing.T, kind commonv1.GameKind, workers int, edit ...func(*ai.Config)) (*aiGame, string) {
	t.Helper()
	return startAIGameWith(t, game.DefaultConfig(), kind, workers, edit...)
}

// startAIGameWith is startAIGame with the game service's configuration
// gcfg (its key prefix aside).
func startAIGameWith(t *testing.T, gcfg game.Config, kind commonv1.GameKind, workers int, edit ...func(*ai.Config)) (*aiGame, string) {
	t.Helper()
	prefix := redistest.Prefix(t)
	gcfg.KeyPrefix = prefix
	acfg := aiConfig(prefix, workers)
	for _, e := range edit {
		e(&acfg)
	}
	cc := apptest.Start(t, redistest.Addr(t), game.Bind(gcfg), ai.Bind(acfg))
	return newAIGame(t, gamev1.NewGameServiceClient(cc), prefix+"create", kind), prefix
}

// newAIGame creates, through games, a game where the AI plays the second
// seat.
func newAIGame(t testing.TB, games gamev1.GameServiceClient, requestID string, kind commonv1.GameKind) *aiGame {
	t.Helper()
	return createAIGame(t, games, &gamev1.CreateGameRequest{
		RequestId: requestID, Kind: kind,
		Seats: []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, PlayerId: "human"}, {Side: commonv1.Side_SIDE_SECOND, AiLevel: 2}},
	})
}

// createAIGame creates, through games, the game req asks for, whose first
// seat is the human's.
func createAIGame(t testing.TB, games gamev1.GameServiceClient, req *gamev1.CreateGameRequest) *aiGame {
	t.Helper()
	resp, err := games.CreateGame(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	g := &aiGame{games: games, id: resp.GetGameId()}
	for _, c := range resp.GetCredentials() {
		if c.GetSide() == commonv1.Side_SIDE_FIRST {
			g.human = metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+c.GetToken())
		}
	}
	return g
}

// waitFor is waitForWithin 30 s, for the AI to act.
func (g *aiGame) waitFor(t testing.TB, cond func(*gamev1.Game) bool) *gamev1.Game {
	t.Helper()
	return g.waitForWithin(t, 30*time.Second, "the AI to act", cond)
}

// waitForWithin reads the game until cond holds, for at most d, and fails
// saying what was awaited and where the game stood.
func (g *aiGame) waitForWithin(t testing.TB, d time.Duration, what string, cond func(*gamev1.Game) bool) *gamev1.Game {
	t.Helper()
	deadline := time.Now().Add(d)
	var last *gamev1.Game
	for time.Now().Before(deadline) {
		r, err := g.games.GetGame(g.human, &gamev1.GetGameRequest{GameId: g.id})
		if err != nil {
			t.Fatal(err)
		}
		last = r.GetGame()
		if cond(last) {
			return last
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v; game at version %d, status %v, %d moves, turn %v, result %v",
		what, d, last.GetVersion(), last.GetStatus(), len(last.GetMoves()), last.GetTurn(), last.GetResult())
	return nil
}

func TestPlayAgainstTheAIWithUndo(t *testing.T) {
	g, _ := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 1)
	for ply := 1; ply <= 5; ply += 2 {
		st := g.waitFor(t, func(x *gamev1.Game) bool { return x.GetTurn() == commonv1.Side_SIDE_FIRST })
		if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: g.id + string(rune('a'+ply)), Move: st.GetLegalMoves()[0]}); err != nil {
			t.Fatal(err)
		}
		g.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == ply+1 })
	}
	if _, err := g.games.Undo(g.human, &gamev1.UndoRequest{GameId: g.id, RequestId: g.id + "undo"}); err != nil {
		t.Fatal(err)
	}
	after := g.waitFor(t, func(*gamev1.Game) bool { return true })
	if len(after.GetMoves()) != 4 || after.GetTurn() != commonv1.Side_SIDE_FIRST {
		t.Fatalf("after undo: %d moves, %v to move; want 4 and the human", len(after.GetMoves()), after.GetTurn())
	}
	// The AI does not move again on its own after an undo.
	time.Sleep(300 * time.Millisecond)
	settled := g.waitFor(t, func(*gamev1.Game) bool { return true })
	if n := len(settled.GetMoves()); n != 4 {
		t.Fatalf("%d moves after undo settled, want 4", n)
	}
	// Play on: the AI replies at a ply it has replied at before, and its
	// reply must be played, not taken for a retry of the undone one.
	mv := settled.GetLegalMoves()[len(settled.GetLegalMoves())-1]
	if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: g.id + "after-undo", Move: mv}); err != nil {
		t.Fatal(err)
	}
	g.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == 6 && x.GetTurn() == commonv1.Side_SIDE_FIRST })
}

// TestAIChoosesItsJanggiFormation: Han is the AI and chooses first, as
// soon as the game exists; then it is the human's (Cho's) turn. The job
// for that choice is queued before the game's creation is committed, and
// a worker quick to take it must wait for the game, not drop the job and
// leave the game to the setup time's default, a minute later.
func TestAIChoosesItsJanggiFormation(t *testing.T) {
	g, prefix := startAIGame(t, commonv1.GameKind_GAME_KIND_JANGGI, 1)
	for i := range 10 {
		if i > 0 {
			g = newAIGame(t, g.games, fmt.Sprintf("%screate-%d", prefix, i), commonv1.GameKind_GAME_KIND_JANGGI)
		}
		st := g.waitFor(t, func(x *gamev1.Game) bool { return x.GetSecondFormation() != commonv1.Formation_FORMATION_UNSPECIFIED })
		if st.GetStatus() != commonv1.GameStatus_GAME_STATUS_SETUP || st.GetTurn() != commonv1.Side_SIDE_FIRST {
			t.Fatalf("game %d, after the AI's choice: %v, %v to choose", i, st.GetStatus(), st.GetTurn())
		}
	}
}

// TestKilledWorkerLosesNoMove takes a job with a worker that dies before
// finishing it; another worker takes it over, and two workers racing on
// one job still commit exactly one move.
func TestKilledWorkerLosesNoMove(t *testing.T) {
	g, prefix := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 0)
	if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	rdb := redistest.Client(t)
	q := aijobs.New(rdb, prefix)
	q.ClaimAfter = 200 * time.Millisecond
	ctx := context.Background()
	taken, err := q.Next(ctx, "doomed", time.Second)
	if err != nil || taken == nil || taken.Job.GameID != g.id {
		t.Fatalf("job %+v %v", taken, err)
	}
	// "doomed" dies here: no move, no acknowledgement.
	time.Sleep(300 * time.Millisecond)
	again, err := q.Next(ctx, "survivor", time.Second)
	if err != nil || again == nil || again.ID != taken.ID {
		t.Fatalf("job not taken over: %+v %v", again, err)
	}
	newWorker := func(name string) *worker.Worker {
		return &worker.Worker{Name: name, Log: logging.Discard(), Queue: q, Games: g.games, Mover: worker.NewBuiltin(4)}
	}
	// Two workers handle the same job at once (the survivor and, say, a
	// worker that was only slow): one move, never two.
	var wg sync.WaitGroup
	for _, name := range []string{"survivor", "slow"} {
		w := newWorker(name)
		wg.Go(func() {
			if err := w.Handle(ctx, again.Job); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	wg.Wait()
	if err := q.Done(ctx, again); err != nil {
		t.Fatal(err)
	}
	st := g.waitFor(t, func(*gamev1.Game) bool { return true })
	if len(st.GetMoves()) != 2 || st.GetTurn() != commonv1.Side_SIDE_FIRST {
		t.Fatalf("%d moves after the AI's job, %v to move; want exactly one AI move", len(st.GetMoves()), st.GetTurn())
	}
	// Handling the finished job once more changes nothing.
	if err := newWorker("late").Handle(ctx, again.Job); err != nil {
		t.Fatal(err)
	}
	if n := len(g.waitFor(t, func(*gamev1.Game) bool { return true }).GetMoves()); n != 2 {
		t.Fatalf("%d moves after a late duplicate, want 2", n)
	}
}

// TestAKilledWorkersJobIsTakenOverWhenItsLeaseLapses: a worker killed
// while it searches (no acknowledgement, no hand back) leaves the AI's
// clock running; another worker takes its job over once the killed one's
// lease lapses (3 s), not after the claim timeout (an hour here).
func TestAKilledWorkersJobIsTakenOverWhenItsLeaseLapses(t *testing.T) {
	g, prefix := startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 0)
	if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	q := aijobs.New(redistest.Client(t), prefix)
	q.ClaimAfter = time.Hour
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if err := q.KeepAlive(ctx, "killed"); err != nil {
		t.Fatal(err)
	}
	taken, err := q.Next(ctx, "killed", time.Second)
	if err != nil || taken == nil || taken.Job.GameID != g.id {
		t.Fatalf("job %+v %v", taken, err)
	}
	// "killed" dies here, its lease no longer renewed.
	w := &worker.Worker{Name: "survivor", Log: logging.Discard(), Queue: q, Games: g.games, Mover: worker.NewBuiltin(4)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	begun := time.Now()
	st := g.waitFor(t, func(g *gamev1.Game) bool { return len(g.GetMoves()) == 2 })
	if took := time.Since(begun); took > 20*time.Second {
		t.Errorf("the AI moved %v after its worker was killed; want within its lease and a scan", took)
	}
	if st.GetTurn() != commonv1.Side_SIDE_FIRST {
		t.Fatalf("%v to move after the AI's move", st.GetTurn())
	}
	stop()
	<-done
}

func TestBestMoveIsReproducibleWithASeed(t *testing.T) {
	c := aiv1.NewAIServiceClient(apptest.Start(t, redistest.Addr(t), ai.Bind(aiConfig(redistest.Prefix(t), 0))))
	req := &aiv1.BestMoveRequest{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Level: 3, Seed: 42, Moves: []*commonv1.Move{{Coordinate: "a4b4"}}}
	first, err := c.BestMove(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, err := c.BestMove(context.Background(), req)
		if err != nil || again.GetMove().GetCoordinate() != first.GetMove().GetCoordinate() || again.GetNodes() != first.GetNodes() {
			t.Fatalf("same seed, different answer: %v vs %v (%v)", again, first, err)
		}
	}
}

// TestBestMoveVariesWithTheSeed: a weak level given other seeds plays
// other moves, so that a client replaying with new seeds gets varied
// games, not one fixed game per position.
func TestBestMoveVariesWithTheSeed(t *testing.T) {
	c := aiv1.NewAIServiceClient(apptest.Start(t, redistest.Addr(t), ai.Bind(aiConfig(redistest.Prefix(t), 0))))
	seen := map[string]bool{}
	for seed := range uint64(8) {
		r, err := c.BestMove(context.Background(), &aiv1.BestMoveRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Level: 1, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		seen[r.GetMove().GetCoordinate()] = true
	}
	if len(seen) < 2 {
		t.Fatalf("level 1 played %v with 8 seeds; want the seed to vary the move", seen)
	}
}

func TestKeyPrefixWithABraceIsRefused(t *testing.T) {
	cfg := aiConfig("ok:", 1)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	cfg.KeyPrefix = "{ai}:"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--key-prefix") {
		t.Fatalf("Validate() = %v, want an error naming --key-prefix", err)
	}
}

func TestSeveralGameAddressesAreRefused(t *testing.T) {
	cfg := aiConfig("ok:", 1)
	cfg.GameAddr = "g1:8080, g2:8080"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--game-addr") {
		t.Fatalf("Validate() = %v, want an error naming --game-addr", err)
	}
}

// TestMalformedUCIOptionsAreRefused: an --ai-uci-options entry that is not
// name=value, or options with no external engine to take them, stop the
// service with the flag named, where they were dropped and the engine
// played without them; well-formed ones pass.
func TestMalformedUCIOptionsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, engine, options string
		wantErr               bool
	}{
		{name: "well formed", engine: "/bin/sh", options: "Threads=1, Skill Level=5,", wantErr: false},
		{name: "no equals sign", engine: "/bin/sh", options: "Threads=1,Hash", wantErr: true},
		{name: "no name", engine: "/bin/sh", options: "=5", wantErr: true},
		{name: "no engine", engine: "", options: "Threads=1", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := aiConfig("ok:", 1)
			cfg.UCIEngine, cfg.UCIOptions = tc.engine, tc.options
			err := cfg.Validate()
			if gotErr := err != nil; gotErr != tc.wantErr || (gotErr && !strings.Contains(err.Error(), "--ai-uci-options")) {
				t.Fatalf("Validate() = %v, want an error naming --ai-uci-options: %v", err, tc.wantErr)
			}
		})
	}
}

// TestUCIOptionsReachTheEngine: --ai-uci-options are set on the external
// engine as it starts, or it plays without the strength or hash the
// operator chose.
func TestUCIOptionsReachTheEngine(t *testing.T) {
	dir := t.TempDir()
	heard := filepath.Join(dir, "heard")
	script := filepath.Join(dir, "engine")
	// A UCI engine that notes every command it reads.
	body := fmt.Sprintf(`#!/bin/sh
while read -r line; do
  echo "$line" >> %q
  case "$line" in
    uci) echo "id name listener"; echo uciok ;;
    isready) echo readyok ;;
    quit) exit 0 ;;
  esac
done
`, heard)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	startAIGame(t, commonv1.GameKind_GAME_KIND_XIANGQI, 1, func(c *ai.Config) {
		c.UCIEngine, c.UCIOptions = script, "Skill Level=3, Hash=16"
	})
	b, err := os.ReadFile(heard)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"setoption name Skill Level value 3", "setoption name Hash value 16"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the engine heard %q; want %q", b, want)
		}
	}
}

// TestAShortClaimTimeoutIsRefused: a claim timeout under a second would
// hand every job to another worker while its first still searches.
func TestAShortClaimTimeoutIsRefused(t *testing.T) {
	cfg := aiConfig("ok:", 1)
	cfg.ClaimAfter = 500 * time.Millisecond
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--ai-claim-after") {
		t.Fatalf("Validate() = %v, want an error naming --ai-claim-after", err)
	}
}

// TestAISeatsPlayOnTheClock: two AI seats that would take about a second
// a move unbounded (level 10 of the built-in engine; an external engine
// at its default movetime) in a game of 3 s each without increment think
// within what their clocks leave them, so neither loses on time in 16
// plies.
func TestAISeatsPlayOnTheClock(t *testing.T) {
	t.Run("built-in", func(t *testing.T) { aiSeatsPlayOnTheClock(t, "") })
	t.Run("external", func(t *testing.T) {
		script, _ := selfEngine(t)
		aiSeatsPlayOnTheClock(t, script)
	})
}

func aiSeatsPlayOnTheClock(t *testing.T, uciEngine string) {
	prefix := redistest.Prefix(t)
	gcfg := game.DefaultConfig()
	gcfg.KeyPrefix = prefix
	acfg := aiConfig(prefix, 2)
	acfg.UCIEngine = uciEngine
	cc := apptest.Start(t, redistest.Addr(t), game.Bind(gcfg), ai.Bind(acfg))
	games := gamev1.NewGameServiceClient(cc)
	resp, err := games.CreateGame(context.Background(), &gamev1.CreateGameRequest{
		RequestId: prefix + "clocked", Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true,
		TimeControl: &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(3 * time.Second), Increment: durationpb.New(0)}}},
		Seats:       []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, AiLevel: 10}, {Side: commonv1.Side_SIDE_SECOND, AiLevel: 10}},
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := games.GetGame(context.Background(), &gamev1.GetGameRequest{GameId: resp.GetGameId()})
		if err != nil {
			t.Fatal(err)
		}
		g := r.GetGame()
		if g.GetResult().GetMethod() == commonv1.EndMethod_END_METHOD_TIMEOUT {
			t.Fatalf("the AI lost on time after %d plies", len(g.GetMoves()))
		}
		if len(g.GetMoves()) >= 16 || g.GetStatus() == commonv1.GameStatus_GAME_STATUS_ENDED {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d plies in 60s", len(g.GetMoves()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
