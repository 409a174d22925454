package ai_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/aijobs"
	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/apptest"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/logging"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/ai/internal/worker"
	"github.com/palacehq/palace/services/game"
)

// stallAfterJob holds, once armed, the game service's goroutine that has
// just queued an AI job (XADD to the queue's stream) for stall before it
// goes on to its commit: a process pause, a long wait for replicas, a
// slow deadline-index write, as the game service sees it.
type stallAfterJob struct {
	stream string
	stall  time.Duration
	armed  atomic.Bool
	done   atomic.Bool
}

func (s *stallAfterJob) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *stallAfterJob) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		s.after([]redis.Cmder{cmd}, err)
		return err
	}
}

func (s *stallAfterJob) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		s.after(cmds, err)
		return err
	}
}

func (s *stallAfterJob) after(cmds []redis.Cmder, err error) {
	if err != nil || !s.armed.Load() {
		return
	}
	for _, c := range cmds {
		args := c.Args()
		if strings.EqualFold(c.Name(), "xadd") && len(args) > 1 && args[1] == s.stream && s.armed.CompareAndSwap(true, false) {
			time.Sleep(s.stall)
			s.done.Store(true)
			return
		}
	}
}

// TestAJobWhoseCommitLandsLateIsNotLost: the game service queues the AI's
// job before the commit that makes it the AI's turn. If that commit lands
// late (more than 0.9 s after the job), the game service queues the job
// again once the commit is in, should a worker have given the job up, so
// that an untimed game does not wait on the AI for ever.
func TestAJobWhoseCommitLandsLateIsNotLost(t *testing.T) {
	var hook *stallAfterJob
	g, prefix := startHookedAIGame(t, func(prefix string) redis.Hook {
		hook = &stallAfterJob{stream: prefix + "{ai}:jobs", stall: 2 * time.Second}
		return hook
	})

	hook.armed.Store(true)
	start := time.Now()
	resp, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}})
	if err != nil {
		t.Fatal(err)
	}
	if !hook.done.Load() {
		t.Fatal("the game service queued no job through the stalling hook")
	}
	t.Logf("the move that made it the AI's turn was committed %v after its job was queued (version %d)", time.Since(start).Round(time.Millisecond), resp.GetGame().GetVersion())
	waitForAIReply(t, g, prefix, "the commit")
}

// startHookedAIGame starts a game service whose Redis client carries the
// hook made for its key prefix, an AI game on it, and a worker.
func startHookedAIGame(t *testing.T, hook func(prefix string) redis.Hook) (*aiGame, string) {
	t.Helper()
	prefix := redistest.Prefix(t)
	g := newAIGame(t, startHookedGames(t, prefix, nil, hook(prefix)), prefix+"create", commonv1.GameKind_GAME_KIND_XIANGQI)
	runWorker(t, g, prefix, &countingMover{engine: worker.NewBuiltin(4)})
	return g, prefix
}

// startHookedGames starts a game service with its keys under prefix,
// its default config adjusted by edit (if not nil), whose Redis client
// carries hooks.
func startHookedGames(t *testing.T, prefix string, edit func(*game.Config), hooks ...redis.Hook) gamev1.GameServiceClient {
	t.Helper()
	gcfg := game.DefaultConfig()
	gcfg.KeyPrefix = prefix
	if edit != nil {
		edit(&gcfg)
	}
	bind := game.Bind(gcfg)
	hooked := func(ctx context.Context, rt *app.Runtime) (func() error, error) {
		for _, h := range hooks {
			rt.Redis.AddHook(h)
		}
		return bind(ctx, rt)
	}
	return gamev1.NewGameServiceClient(apptest.Start(t, redistest.Addr(t), hooked))
}

// startOneWorker runs a worker on q for the test, the only one.
func startOneWorker(t *testing.T, q *aijobs.Queue, games gamev1.GameServiceClient) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := &worker.Worker{Name: "only", Log: logging.Discard(), Queue: q, Games: games, Mover: worker.NewBuiltin(4)}
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitForAIReply fails the test unless the AI has replied to the human's
// first move within 15 s of since; a level-2 AI answers in milliseconds
// once its job is played.
func waitForAIReply(t *testing.T, g *aiGame, prefix, since string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var last *gamev1.Game
	for time.Now().Before(deadline) {
		r, err := g.games.GetGame(g.human, &gamev1.GetGameRequest{GameId: g.id})
		if err != nil {
			t.Fatal(err)
		}
		last = r.GetGame()
		if len(last.GetMoves()) >= 2 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	depth, err := aijobs.New(redistest.Client(t), prefix).Depth(context.Background())
	t.Fatalf("15 s after %s the game (version %d, %d moves, turn %v) still waits on the AI; AI jobs queued or pending: %d (%v)",
		since, last.GetVersion(), len(last.GetMoves()), last.GetTurn(), depth, err)
}

// commitDies, once armed for a game, lets the game service queue that
// game's next AI job and then makes its commit fail without reaching
// Redis: the replica was killed between the two.
type commitDies struct {
	sha, body string
	game      atomic.Value // string: the game whose next commit dies
	jobSeen   atomic.Bool
	stream    string
	killed    atomic.Bool
}

func (c *commitDies) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commitDies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if c.kill(cmd) {
			cmd.SetErr(errReplicaKilled)
			return cmd.Err()
		}
		err := next(ctx, cmd)
		c.saw(cmd)
		return err
	}
}

func (c *commitDies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if c.kill(cmd) {
				for _, x := range cmds {
					x.SetErr(errReplicaKilled)
				}
				return cmds[0].Err()
			}
		}
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			c.saw(cmd)
		}
		return err
	}
}

func (c *commitDies) saw(cmd redis.Cmder) {
	args := cmd.Args()
	g, _ := c.game.Load().(string)
	if g == "" || !strings.EqualFold(cmd.Name(), "xadd") || len(args) < 2 || args[1] != c.stream {
		return
	}
	for _, a := range args {
		if s, ok := a.(string); ok && strings.Contains(s, `"g":"`+g+`"`) {
			c.jobSeen.Store(true)
		}
		if b, ok := a.([]byte); ok && strings.Contains(string(b), `"g":"`+g+`"`) {
			c.jobSeen.Store(true)
		}
	}
}

func (c *commitDies) kill(cmd redis.Cmder) bool {
	if !c.jobSeen.Load() || c.killed.Load() {
		return false
	}
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	name := strings.ToLower(cmd.Name())
	if (name == "evalsha" && args[1] == c.sha) || (name == "eval" && args[1] == c.body) {
		return c.killed.CompareAndSwap(false, true)
	}
	return false
}

// TestAJobWhoseCommitNeverLandsHoldsNoWorker: a game service replica
// queues the AI's job for game A and is killed before its commit; the
// human never sends the move again. The one worker (the default of aid
// and palace serve) takes that job at once and looks for its commit for a
// moment, then puts it back for a later look: the human of game B, who
// moves meanwhile, gets the AI's reply about as soon as usual, not after
// a wait on game A's commit, on the AI's clock in a timed game.
func TestAJobWhoseCommitNeverLandsHoldsNoWorker(t *testing.T) {
	lua, err := os.ReadFile("../game/internal/store/commit.lua")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(lua)
	prefix := redistest.Prefix(t)
	hook := &commitDies{sha: hex.EncodeToString(sum[:]), body: string(lua), stream: prefix + "{ai}:jobs"}
	games := startHookedGames(t, prefix, nil, hook)
	a := newAIGame(t, games, prefix+"a", commonv1.GameKind_GAME_KIND_XIANGQI)
	b := newAIGame(t, games, prefix+"b", commonv1.GameKind_GAME_KIND_XIANGQI)
	q := aijobs.New(redistest.Client(t), prefix)
	q.ClaimAfter = 30 * time.Second // --ai-claim-after's default
	startOneWorker(t, q, games)

	hook.game.Store(a.id)
	if _, err := games.MakeMove(a.human, &gamev1.MakeMoveRequest{GameId: a.id, RequestId: "a1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err == nil {
		t.Fatal("game A's move went through: the hook killed nothing")
	}
	if !hook.killed.Load() {
		t.Fatal("the hook killed no commit")
	}
	time.Sleep(100 * time.Millisecond) // the worker has taken A's job
	start := time.Now()
	if _, err := games.MakeMove(b.human, &gamev1.MakeMoveRequest{GameId: b.id, RequestId: "b1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == 2 })
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("game B's AI replied %v after the human's move: the only worker was held by game A's job, whose commit never landed", took.Round(time.Millisecond))
	}
}

var errReplicaKilled = errors.New("the replica was killed before its commit")

// TestTheAIIsNotChargedTheWaitForAHeldCommit: in a timed game against
// the AI, the commit of the human's move lands 1.1 s after its AI job was
// queued (a process pause, Redis stalled). The turn the commit began is
// excused its hold, so the AI is charged only its own thinking: the
// worker, which took the job at once and put it back after looking a
// second for the commit, does not play a second after the commit landed,
// on the AI's clock (before: charged 981 ms).
func TestTheAIIsNotChargedTheWaitForAHeldCommit(t *testing.T) {
	prefix := redistest.Prefix(t)
	hook := &stallAfterJob{stream: prefix + "{ai}:jobs", stall: 1100 * time.Millisecond}
	games := startHookedGames(t, prefix, func(c *game.Config) { c.LagMaxPerMove, c.LagBank, c.LagRefill = 0, 0, 0 }, hook)
	const main = 5 * time.Minute
	g := createAIGame(t, games, &gamev1.CreateGameRequest{
		RequestId: prefix + "create", Kind: commonv1.GameKind_GAME_KIND_XIANGQI,
		TimeControl: &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(main)}}},
		Seats:       []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, PlayerId: "human"}, {Side: commonv1.Side_SIDE_SECOND, AiLevel: 1}},
	})
	q := aijobs.New(redistest.Client(t), prefix)
	q.ClaimAfter = 30 * time.Second // --ai-claim-after's default
	startOneWorker(t, q, games)

	g.play(t, 1) // both first moves: the clocks start with the human's next
	st := g.waitFor(t, func(x *gamev1.Game) bool { return x.GetTurn() == commonv1.Side_SIDE_FIRST })
	hook.armed.Store(true)
	sent := time.Now()
	if _, err := games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: fmt.Sprintf("%s-3", g.id), Move: st.GetLegalMoves()[0]}); err != nil {
		t.Fatal(err)
	}
	landed := time.Since(sent)
	after := g.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == 4 })
	replied := time.Since(sent)
	charged := main - after.GetClocks().GetSecond().GetMainLeft().AsDuration()
	t.Logf("the human's move landed %v after it was sent, the AI replied %v after it; the AI was charged %v",
		landed.Round(time.Millisecond), replied.Round(time.Millisecond), charged.Round(time.Millisecond))
	if charged > 400*time.Millisecond {
		t.Fatalf("the AI was charged %v for a reply whose turn began with a commit held %v (excused): the worker postponed its job past the commit's landing, on the AI's clock",
			charged.Round(time.Millisecond), landed.Round(time.Millisecond))
	}
}

// slowMark holds the worker's first unseen mark (SET {ai}:unseen:...)
// for delay before it reaches Redis: the worker descheduled (GC, CPU)
// between its read that missed the commit and its mark, or a slow
// round trip to the queue's Redis.
type slowMark struct {
	delay time.Duration
	held  atomic.Bool
	// done is when the held mark reached Redis (unix ns).
	done atomic.Int64
}

func (s *slowMark) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *slowMark) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if strings.EqualFold(cmd.Name(), "set") && len(args) > 1 && strings.Contains(fmt.Sprint(args[1]), "{ai}:unseen:") && s.held.CompareAndSwap(false, true) {
			time.Sleep(s.delay)
			defer func() { s.done.Store(time.Now().UnixNano()) }()
		}
		return next(ctx, cmd)
	}
}
func (s *slowMark) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAMarkAfterTheCommitsLookIsNoPostponement: in a timed game, the
// human's commit lands 1.1 s after its AI job; the worker missed it in the
// last look of its second and marks the job unseen, but the mark reaches
// Redis only after the game service asked for it (a window of a few
// milliseconds, widened here to 500 ms). The worker looks once more after
// its mark and plays: the AI is charged the wait for the mark, not a
// postponement on top of it.
func TestAMarkAfterTheCommitsLookIsNoPostponement(t *testing.T) {
	prefix := redistest.Prefix(t)
	hook := &stallAfterJob{stream: prefix + "{ai}:jobs", stall: 1100 * time.Millisecond}
	games := startHookedGames(t, prefix, func(c *game.Config) { c.LagMaxPerMove, c.LagBank, c.LagRefill = 0, 0, 0 }, hook)
	const main = 5 * time.Minute
	g := createAIGame(t, games, &gamev1.CreateGameRequest{
		RequestId: prefix + "create", Kind: commonv1.GameKind_GAME_KIND_XIANGQI,
		TimeControl: &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(main)}}},
		Seats:       []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, PlayerId: "human"}, {Side: commonv1.Side_SIDE_SECOND, AiLevel: 1}},
	})
	slow := &slowMark{delay: 500 * time.Millisecond}
	wc := redistest.Client(t)
	wc.AddHook(slow)
	q := aijobs.New(wc, prefix)
	q.ClaimAfter = 30 * time.Second
	startOneWorker(t, q, games)

	g.play(t, 1)
	st := g.waitFor(t, func(x *gamev1.Game) bool { return x.GetTurn() == commonv1.Side_SIDE_FIRST })
	hook.armed.Store(true)
	sent := time.Now()
	_, err := games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: fmt.Sprintf("%s-3", g.id), Move: st.GetLegalMoves()[0]})
	if err != nil {
		t.Fatal(err)
	}
	landed := time.Since(sent)
	after := g.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == 4 })
	replied := time.Since(sent)
	charged := main - after.GetClocks().GetSecond().GetMainLeft().AsDuration()
	t.Logf("commit answered %v after the move was sent, AI replied %v after; AI charged %v; mark held: %v",
		landed.Round(time.Millisecond), replied.Round(time.Millisecond), charged.Round(time.Millisecond), slow.held.Load())
	if !slow.held.Load() {
		t.Fatal("no mark was held: the worker found the commit in its second")
	}
	// The AI's turn began as the commit landed (its hold excused); it is
	// charged the wait for the mark, and more only if the job was put back.
	waited := time.Unix(0, slow.done.Load()).Sub(sent.Add(landed))
	if charged-waited > 150*time.Millisecond {
		t.Fatalf("the AI was charged %v, %v more than its worker's mark took to land after the commit: the job was not queued again, and the worker played it only at its next look", charged.Round(time.Millisecond), (charged - waited).Round(time.Millisecond))
	}
}
