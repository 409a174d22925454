package main

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/apptest"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestLoadtestClocksFindsAnEarlyMoveRefused: every "early" game's third move
// is sent at half its budget, well in time, and the game service refuses
// it (FailedPrecondition) without playing it; the first side is then
// flagged at its deadline. A player who moved in time lost on time: the
// run must not pass.
func TestLoadtestClocksFindsAnEarlyMoveRefused(t *testing.T) {
	upstream := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	f := &fault{}
	f.move = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
		if strings.HasSuffix(req.GetRequestId(), "-3") {
			f.injected.Add(1)
			return nil, status.Error(codes.FailedPrecondition, "move refused")
		}
		return up.MakeMove(ctx, req)
	}
	addr := startFaultyProxy(t, upstream, f)
	out, errOut, code := palace("loadtest", "clocks", "--addr", addr, "--games", "6", "--spread", "1s",
		"--min-time", "2s", "--max-time", "2s", "--early", "1", "--racing", "0", "--service-keys", apptest.ServiceKeys)
	var rep clocksReport
	lastJSON(t, out, &rep)
	if f.injected.Load() == 0 {
		t.Fatalf("no move refused: %+v\n%s", rep, errOut)
	}
	if code == exitOK {
		t.Fatalf("%d in-time moves refused and their players flagged, yet exit 0; report %+v", f.injected.Load(), rep)
	}
}
