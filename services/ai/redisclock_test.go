package ai_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// redisClockApart sets Redis' clock (its TIME replies) skew behind the
// hosts' clocks, as a Redis host whose clock is set apart would; and, once
// armed, holds the goroutine that has just queued an AI job for stall
// before its commit, so that the worker, blocked on its queue, reads the
// job before the commit lands, as it often does.
type redisClockApart struct {
	skew   time.Duration
	stream string
	stall  time.Duration
	armed  atomic.Bool
}

func (s *redisClockApart) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *redisClockApart) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		s.after([]redis.Cmder{cmd})
		return err
	}
}

func (s *redisClockApart) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		s.after(cmds)
		return err
	}
}

func (s *redisClockApart) after(cmds []redis.Cmder) {
	for _, c := range cmds {
		if tc, ok := c.(*redis.TimeCmd); ok && tc.Err() == nil {
			tc.SetVal(tc.Val().Add(-s.skew))
		}
		args := c.Args()
		if strings.EqualFold(c.Name(), "xadd") && len(args) > 1 && args[1] == s.stream && s.armed.CompareAndSwap(true, false) {
			time.Sleep(s.stall)
		}
	}
}

// TestAJobsAgeIsMeasuredByRedisClock: the game service dates an AI job by
// Redis' clock, the one every process goes by, and the worker measures
// the job's age by it too, not by its host's clock, when it finds the
// job's commit not shown yet (it landed 300 ms after the job). Measured by
// a host clock 3 minutes ahead, the job looked void and was dropped: the
// AI never replied. 40 s ahead, with the default claim timeout, it looked
// 40 s old and was postponed a quarter of that: the AI replied 10 s late,
// on its clock.
func TestAJobsAgeIsMeasuredByRedisClock(t *testing.T) {
	for _, skew := range []time.Duration{3 * time.Minute, 40 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			prefix := redistest.Prefix(t)
			hook := &redisClockApart{skew: skew, stream: prefix + "{ai}:jobs", stall: 300 * time.Millisecond}
			gcfg := game.DefaultConfig()
			gcfg.KeyPrefix = prefix
			bind := game.Bind(gcfg)
			hooked := func(ctx context.Context, rt *app.Runtime) (func() error, error) {
				rt.Redis.AddHook(hook)
				return bind(ctx, rt)
			}
			cc := apptest.Start(t, redistest.Addr(t), hooked)
			g := newAIGame(t, gamev1.NewGameServiceClient(cc), prefix+"create", commonv1.GameKind_GAME_KIND_XIANGQI)
			rdb := redistest.Client(t)
			rdb.AddHook(hook)
			q := aijobs.New(rdb, prefix)
			q.ClaimAfter = 30 * time.Second // --ai-claim-after's default
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			w := &worker.Worker{Name: "w", Log: logging.Discard(), Queue: q, Games: g.games, Mover: worker.NewBuiltin(4)}
			go func() { defer close(done); w.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })

			hook.armed.Store(true)
			start := time.Now()
			if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
				t.Fatal(err)
			}
			waitForAIReply(t, g, prefix, "the human's move")
			if took := time.Since(start); took > 4*time.Second {
				t.Fatalf("the AI replied %v after the human's move, whose commit landed 300 ms after its job; want within a second or two", took.Round(time.Millisecond))
			}
		})
	}
}
