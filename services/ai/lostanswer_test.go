package ai_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// lateLostCommit stalls, once armed, the game service's goroutine that has
// just queued an AI job (as stallAfterJob does), and then loses the answer
// of the commit that follows: Redis applies the script, the process gets a
// connection reset (a network cut, the connection killed by a proxy or a
// failover) instead of its reply.
type lateLostCommit struct {
	stream string
	stall  time.Duration
	armed  atomic.Bool
	// 0: nothing yet, 1: job queued and stalled, 2: commit answer lost
	stage atomic.Int32
}

func (s *lateLostCommit) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *lateLostCommit) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		return s.after([]redis.Cmder{cmd}, err)
	}
}

func (s *lateLostCommit) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		return s.after(cmds, err)
	}
}

var errReset = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}

func (s *lateLostCommit) after(cmds []redis.Cmder, err error) error {
	if err != nil {
		return err
	}
	for _, c := range cmds {
		args := c.Args()
		name := strings.ToLower(c.Name())
		switch {
		case s.armed.Load() && name == "xadd" && len(args) > 1 && args[1] == s.stream && s.armed.CompareAndSwap(true, false):
			time.Sleep(s.stall)
			s.stage.Store(1)
			return err
		case (name == "evalsha" || name == "eval") && s.stage.CompareAndSwap(1, 2):
			// The script ran in Redis; its answer never reaches the process.
			c.SetErr(errReset)
			return errReset
		}
	}
	return err
}

// TestALateCommitWhoseAnswerIsLostStillGetsTheAIsMove: the move that
// makes it the AI's turn is committed more than the worker's commit wait
// (1 s) after its job was queued, and the commit's answer is lost on the
// way back, so the game service does not queue the job again (its retry is
// answered from the stored answer). The worker keeps the job for another
// try instead of dropping it as void, and the AI moves once the commit
// shows: an untimed game does not wait on the AI for ever.
func TestALateCommitWhoseAnswerIsLostStillGetsTheAIsMove(t *testing.T) {
	var hook *lateLostCommit
	g, prefix := startHookedAIGame(t, func(prefix string) redis.Hook {
		hook = &lateLostCommit{stream: prefix + "{ai}:jobs", stall: 3 * time.Second}
		return hook
	})

	hook.armed.Store(true)
	req := &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}
	_, err := g.games.MakeMove(g.human, req)
	if hook.stage.Load() != 2 {
		t.Fatalf("the hook did not lose the late commit's answer (stage %d, err %v)", hook.stage.Load(), err)
	}
	if err == nil {
		t.Fatal("the move was answered although its commit's answer was lost")
	}
	t.Logf("first attempt: %v", err)
	// The client retries with the same request id, as it is told to.
	var resp *gamev1.MakeMoveResponse
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err = g.games.MakeMove(g.human, req)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	t.Logf("retry answered: version %d, move %s", resp.GetGame().GetVersion(), resp.GetMove().GetMove().GetCoordinate())

	waitForAIReply(t, g, prefix, "the retry")
}
