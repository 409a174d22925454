package ai_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/aijobs"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/logging"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/services/ai/internal/worker"
	"github.com/palacehq/palace/services/game"
)

// countingSlowMover searches like the builtin engine after think, and
// counts the searches of each position, and how many run at once.
type countingSlowMover struct {
	engine    *worker.Builtin
	think     time.Duration
	mu        sync.Mutex
	inflight  int
	maxAtOnce int
	calls     atomic.Int64
}

func (m *countingSlowMover) Move(ctx context.Context, v rules.Variant, start string, moves []rules.Move, level int, seed uint64, budget time.Duration) (rules.Move, uint64, error) {
	m.calls.Add(1)
	m.mu.Lock()
	m.inflight++
	m.maxAtOnce = max(m.maxAtOnce, m.inflight)
	m.mu.Unlock()
	defer func() { m.mu.Lock(); m.inflight--; m.mu.Unlock() }()
	time.Sleep(m.think)
	return m.engine.Move(ctx, v, start, moves, level, seed, budget)
}

// TestALateCommitSeenByItsWorkerIsSearchedOnce: the commit of the
// human's move lands 0.92 s after its AI job (a stall), within the
// worker's one-second look for it: the worker found the commit and
// searches, and the game service, whose commit came late, does not queue
// the job again for another worker to search the same position at once
// (before: two searches at once, the job queued again on time alone).
func TestALateCommitSeenByItsWorkerIsSearchedOnce(t *testing.T) {
	prefix := redistest.Prefix(t)
	hook := &stallAfterJob{stream: prefix + "{ai}:jobs", stall: 920 * time.Millisecond}
	games := startHookedGames(t, prefix, nil, redis.Hook(hook))
	g := newAIGame(t, games, prefix+"create", commonv1.GameKind_GAME_KIND_XIANGQI)
	mover := &countingSlowMover{engine: worker.NewBuiltin(4), think: 700 * time.Millisecond}
	startWorkers(t, prefix, games, mover, "w1", "w2")
	time.Sleep(200 * time.Millisecond) // both workers wait on the queue

	hook.armed.Store(true)
	sent := time.Now()
	if _, err := games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	landed := time.Since(sent)
	g.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == 2 })
	time.Sleep(time.Second) // any second search has ended
	mover.mu.Lock()
	atOnce := mover.maxAtOnce
	mover.mu.Unlock()
	t.Logf("the human's move was answered %v after it was sent; %d searches of the AI's one reply, at most %d at once",
		landed.Round(time.Millisecond), mover.calls.Load(), atOnce)
	if n := mover.calls.Load(); n != 1 || atOnce != 1 {
		t.Fatalf("the AI's one reply was searched %d times, %d at once: the job queued again after a commit 0.92 s late was searched by a second worker while the first, which had seen the commit within its 1 s look, still searched it", n, atOnce)
	}
}

// stallAfterLoad holds, once armed, the game service's goroutine after
// its read of a game (the pipeline that reads Redis' TIME with it) for
// load, and after its next XADD of an AI job for job: a command judged at
// the read's time that reaches its commit a while later (a GC or CPU
// stall, a slow Redis), whose commit then lands a moment after its job.
type stallAfterLoad struct {
	stream    string
	load, job time.Duration
	armed     atomic.Bool
	loaded    atomic.Bool
	queued    atomic.Bool
}

func (s *stallAfterLoad) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *stallAfterLoad) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		s.after([]redis.Cmder{cmd})
		return err
	}
}

func (s *stallAfterLoad) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		s.after(cmds)
		return err
	}
}

func (s *stallAfterLoad) after(cmds []redis.Cmder) {
	if !s.armed.Load() {
		return
	}
	for _, c := range cmds {
		args := c.Args()
		switch {
		case strings.EqualFold(c.Name(), "time") && len(cmds) > 1 && s.loaded.CompareAndSwap(false, true):
			time.Sleep(s.load)
			return
		case strings.EqualFold(c.Name(), "xadd") && len(args) > 1 && args[1] == s.stream && s.loaded.Load() && s.queued.CompareAndSwap(false, true):
			time.Sleep(s.job)
			s.armed.Store(false)
			return
		}
	}
}

// TestAJobQueuedLateInItsCommandIsPlayedAtOnce: a human's move is read
// (and judged) by a game service replica that then stalls 1.2 s before it
// queues the AI's job, whose commit lands 50 ms after it. The job is dated
// as queued, not as judged, so the worker that reads it at once looks for
// its commit as for any new job and plays it (before: it took the job for
// a later try 1.2 s old, looked once, missed the commit by 50 ms and put
// the job back: the AI replied 300 ms late, on its clock).
func TestAJobQueuedLateInItsCommandIsPlayedAtOnce(t *testing.T) {
	prefix := redistest.Prefix(t)
	const keys = "k1:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	gamesA := startHookedGames(t, prefix, func(c *game.Config) { c.SigningKeys = keys })
	hook := &stallAfterLoad{stream: prefix + "{ai}:jobs", load: 1200 * time.Millisecond, job: 50 * time.Millisecond}
	gamesB := startHookedGames(t, prefix, func(c *game.Config) { c.SigningKeys = keys }, redis.Hook(hook))
	g := newAIGame(t, gamesA, prefix+"create", commonv1.GameKind_GAME_KIND_XIANGQI)
	q := aijobs.New(redistest.Client(t), prefix)
	q.ClaimAfter = 30 * time.Second
	startOneWorker(t, q, gamesA)
	time.Sleep(200 * time.Millisecond)

	hook.armed.Store(true)
	if _, err := gamesB.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	answered := time.Now()
	if !hook.queued.Load() {
		t.Fatalf("the hook did not stall the command (loaded %v, queued %v)", hook.loaded.Load(), hook.queued.Load())
	}
	g.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == 2 })
	replied := time.Since(answered)
	t.Logf("the AI replied %v after the human's move was answered", replied.Round(time.Millisecond))
	if replied > 200*time.Millisecond {
		t.Fatalf("the AI replied %v after the human's move was answered, its commit 50 ms after its job: the worker took the job, dated by the command's start 1.2 s before it was queued, for a later try, looked once and postponed it", replied.Round(time.Millisecond))
	}
}

// stallAfterCommit holds, once armed, the game service's goroutine for
// stall after its commit script has run in Redis: the commit is in and
// readable, its answer slow (the wait for replicas with
// --redis-wait-replicas, a busy process).
type stallAfterCommit struct {
	sha, body string
	stall     time.Duration
	armed     atomic.Bool
	done      atomic.Bool
}

func (s *stallAfterCommit) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *stallAfterCommit) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		s.after([]redis.Cmder{cmd})
		return err
	}
}

func (s *stallAfterCommit) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		s.after(cmds)
		return err
	}
}

func (s *stallAfterCommit) after(cmds []redis.Cmder) {
	if !s.armed.Load() {
		return
	}
	for _, c := range cmds {
		args := c.Args()
		name := strings.ToLower(c.Name())
		if len(args) > 1 && ((name == "evalsha" && args[1] == s.sha) || (name == "eval" && args[1] == s.body)) && s.armed.CompareAndSwap(true, false) {
			time.Sleep(s.stall)
			s.done.Store(true)
			return
		}
	}
}

// TestACommitAnsweredLateIsSearchedOnce: the commit of the human's move
// lands in Redis at once, right after its AI job, but its answer comes
// back to the game service 0.95 s later (waiting for replicas with
// --redis-wait-replicas, say). A worker read the job and the commit at
// once and searches (a strong level thinks for seconds); the game
// service, whose commit came late, does not queue the job again for the
// other worker to search too (before: two searches at once).
func TestACommitAnsweredLateIsSearchedOnce(t *testing.T) {
	lua, err := os.ReadFile("../game/internal/store/commit.lua")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(lua)
	prefix := redistest.Prefix(t)
	hook := &stallAfterCommit{sha: hex.EncodeToString(sum[:]), body: string(lua), stall: 950 * time.Millisecond}
	games := startHookedGames(t, prefix, nil, redis.Hook(hook))
	g := newAIGame(t, games, prefix+"create", commonv1.GameKind_GAME_KIND_XIANGQI)
	mover := &countingSlowMover{engine: worker.NewBuiltin(4), think: 1500 * time.Millisecond}
	startWorkers(t, prefix, games, mover, "w1", "w2")
	time.Sleep(200 * time.Millisecond)

	hook.armed.Store(true)
	sent := time.Now()
	if _, err := games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	if !hook.done.Load() {
		t.Fatal("the hook stalled no commit")
	}
	answered := time.Since(sent)
	g.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == 2 })
	time.Sleep(2 * time.Second)
	mover.mu.Lock()
	atOnce := mover.maxAtOnce
	mover.mu.Unlock()
	t.Logf("the human's move was answered %v after it was sent; %d searches of the AI's one reply, at most %d at once", answered.Round(time.Millisecond), mover.calls.Load(), atOnce)
	if n := mover.calls.Load(); n != 1 || atOnce != 1 {
		t.Fatalf("the AI's one reply was searched %d times, %d at once: its commit was readable at once, only its answer came 0.95 s late, and the job queued again went to a second worker while the first searched", n, atOnce)
	}
}

// startWorkers runs a worker of each name on the queue under prefix for
// the test, all with mover.
func startWorkers(t *testing.T, prefix string, games gamev1.GameServiceClient, mover worker.Mover, names ...string) {
	t.Helper()
	for _, name := range names {
		q := aijobs.New(redistest.Client(t), prefix)
		q.ClaimAfter = 30 * time.Second // --ai-claim-after's default
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		w := &worker.Worker{Name: name, Log: logging.Discard(), Queue: q, Games: games, Mover: mover}
		go func() { defer close(done); w.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
}

// jobsOf lists the jobs of game in the queue's stream under prefix.
func jobsOf(t *testing.T, prefix, game string) []aijobs.Job {
	t.Helper()
	msgs, err := redistest.Client(t).XRange(context.Background(), prefix+"{ai}:jobs", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var jobs []aijobs.Job
	for _, m := range msgs {
		s, _ := m.Values["j"].(string)
		var j aijobs.Job
		if json.Unmarshal([]byte(s), &j) == nil && j.GameID == game {
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// TestAnotherJobsMarkDoesNotRequeueAFoundJob: the human's move is queued
// (job J1, version v) and its commit dies (replica killed); a worker looks
// a second for it, marks J1 unseen, and looks again now and then. The
// human retries; the retry's job J2 (same version v) has its commit land
// 0.7 s after it, within the worker's one-second look: a worker finds it
// and searches. The game service, its commit late, asks after J2's mark
// alone, and does not queue the job a third time for a second worker to
// search the same position at once (before: J1's mark, keyed by game and
// version, did).
func TestAnotherJobsMarkDoesNotRequeueAFoundJob(t *testing.T) {
	lua, err := os.ReadFile("../game/internal/store/commit.lua")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(lua)
	prefix := redistest.Prefix(t)
	dies := &commitDies{sha: hex.EncodeToString(sum[:]), body: string(lua), stream: prefix + "{ai}:jobs"}
	stall := &stallAfterJob{stream: prefix + "{ai}:jobs", stall: 700 * time.Millisecond}
	games := startHookedGames(t, prefix, nil, dies, stall)
	g := newAIGame(t, games, prefix+"create", commonv1.GameKind_GAME_KIND_XIANGQI)
	mover := &countingSlowMover{engine: worker.NewBuiltin(4), think: 500 * time.Millisecond}
	startWorkers(t, prefix, games, mover, "w1", "w2")
	time.Sleep(200 * time.Millisecond)

	dies.game.Store(g.id)
	if _, err := games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err == nil {
		t.Fatal("the first try went through: the hook killed nothing")
	}
	// J1 is looked at again a quarter of its age later, and marked at each
	// look: the retry comes right after a look of J1 some 6 s old, so that
	// J1's next look (1.5 s on) falls after the AI's reply, and only the
	// jobs of the retry can search.
	j1 := jobsOf(t, prefix, g.id)[0]
	mark := prefix + "{ai}:unseen:" + g.id + ":" + strconv.FormatUint(j1.Version, 10) + ":" + j1.Mark
	rdb := redistest.Client(t)
	first := time.Now()
	var last time.Duration
	for {
		ttl, err := rdb.PTTL(context.Background(), mark).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl > last && last > 0 && time.Since(first) > 6*time.Second {
			break // J1 just looked and marked again
		}
		last = ttl
		if time.Since(first) > 20*time.Second {
			t.Fatalf("J1's mark %s was not refreshed (pttl %v)", mark, ttl)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stall.armed.Store(true)
	if _, err := games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	if !stall.done.Load() {
		t.Fatal("the retry's job was not stalled")
	}
	jobs := jobsOf(t, prefix, g.id)
	g.waitFor(t, func(x *gamev1.Game) bool { return len(x.GetMoves()) == 2 })
	time.Sleep(time.Second) // any second search has ended
	mover.mu.Lock()
	atOnce := mover.maxAtOnce
	mover.mu.Unlock()
	t.Logf("jobs of the game right after the retry: %d; %d searches of the AI's one reply, at most %d at once", len(jobs), mover.calls.Load(), atOnce)
	if len(jobs) > 2 {
		t.Errorf("the retry's commit landed 0.7 s after its job, found by a worker within its 1 s look, yet the job was queued again (%d jobs): the game service took the unseen mark left by the first try's job at the same version", len(jobs))
	}
	if atOnce > 1 {
		t.Errorf("the AI's one reply was searched %d times, %d at once", mover.calls.Load(), atOnce)
	}
}
