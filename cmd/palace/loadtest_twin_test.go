package main

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/apptest"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestLoadtestGamesCountsALostMoveAcknowledgedToItsTwin: a move sent twice
// at once (retryAlongside), one call failed and the other acknowledged, and
// the move never applied. It is lost whichever call was acknowledged: the
// tool's own, or the one sent alongside. Which of the two reaches the proxy
// first is chance, so the run is repeated until the tool's own call was the
// one failed (its error reads "move X in ID", not "sent twice at once"),
// at most five times, every run checked.
func TestLoadtestGamesCountsALostMoveAcknowledgedToItsTwin(t *testing.T) {
	upstream := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	for attempt := range 5 {
		f := twinAckedThenLost()
		addr := startFaultyProxy(t, upstream, f)
		out, errOut, _ := palace("loadtest", "games", "--addr", addr, "--games", "1", "--duration", "1500ms",
			"--floor=false", "--retry-rate", "1", "--reconnect-rate", "0", "--service-keys", apptest.ServiceKeys)
		var rep gamesReport
		lastJSON(t, out, &rep)
		if f.injected.Load() != 1 {
			t.Fatalf("attempt %d: the fault happened %d times, want once\n%s", attempt, f.injected.Load(), errOut)
		}
		if rep.Lost == 0 {
			t.Fatalf("attempt %d: a move acknowledged to one of its two calls and never applied: lost %d, want > 0\n%s", attempt, rep.Lost, errOut)
		}
		if !strings.Contains(errOut, "sent twice at once") {
			return // the tool's own call was the one failed
		}
	}
}

// twinAckedThenLost fails the first arrival of the first request id sent
// twice at once and acknowledges the second without passing the move on.
func twinAckedThenLost() *fault {
	f := &fault{}
	type pair struct {
		paired chan struct{}
		inject bool
		done   bool
	}
	var mu sync.Mutex
	inflight := map[string]*pair{}
	var used atomic.Bool
	f.move = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
		if used.Load() {
			return up.MakeMove(ctx, req)
		}
		id := req.GetRequestId()
		mu.Lock()
		if p, ok := inflight[id]; ok && !p.done {
			// The second call of a pair.
			p.done = true
			delete(inflight, id)
			p.inject = used.CompareAndSwap(false, true)
			close(p.paired)
			mu.Unlock()
			if !p.inject {
				return up.MakeMove(ctx, req)
			}
			g, err := up.GetGame(ctx, &gamev1.GetGameRequest{GameId: req.GetGameId()})
			if err != nil {
				return nil, err
			}
			f.injected.Add(1)
			return &gamev1.MakeMoveResponse{Game: g.GetGame(),
				Move: &gamev1.MoveRecord{Ply: uint32(len(g.GetGame().GetMoves()) + 1), Move: req.GetMove()}}, nil
		}
		p := &pair{paired: make(chan struct{})}
		inflight[id] = p
		mu.Unlock()
		select {
		case <-p.paired:
			if p.inject {
				// Let the twin's acknowledgement go first.
				time.Sleep(50 * time.Millisecond)
				return nil, status.Error(codes.Internal, "answer lost (injected)")
			}
		case <-time.After(50 * time.Millisecond):
			mu.Lock()
			if !p.done {
				p.done = true
				delete(inflight, id)
			}
			mu.Unlock()
		}
		return up.MakeMove(ctx, req)
	}
	return f
}
