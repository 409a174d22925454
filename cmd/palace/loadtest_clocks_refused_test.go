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

// refusingThirdMoves starts a server behind a proxy that refuses every
// game's third move (FailedPrecondition) without playing it, as a game
// service that wrongly took a move in time for a late one would, and
// returns the proxy's address and the count of moves refused.
func refusingThirdMoves(t *testing.T) (string, *fault) {
	upstream := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	f := &fault{}
	f.move = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
		if strings.HasSuffix(req.GetRequestId(), "-3") {
			f.injected.Add(1)
			return nil, status.Error(codes.FailedPrecondition, "move refused")
		}
		return up.MakeMove(ctx, req)
	}
	return startFaultyProxy(t, upstream, f), f
}

// TestLoadtestClocksFindsAnEarlyMoveRefused: every "early" game's third move
// is sent at half its budget, well in time, and refused; the first side is
// then flagged at its deadline. A player who moved in time lost on time:
// the run must not pass.
func TestLoadtestClocksFindsAnEarlyMoveRefused(t *testing.T) {
	addr, f := refusingThirdMoves(t)
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

// TestLoadtestClocksFindsARacingMoveRefusedInTime: every racing move is
// aimed up to 900 ms before its last in-time instant (--race-after 0),
// and refused; the first side is then flagged at its deadline. The tool
// judged a refused racing move by the game it left alone, and took these
// for late moves rightly refused: the run passed. A move refused before
// its last in-time instant came back is a wrong refusal, racing or not.
func TestLoadtestClocksFindsARacingMoveRefusedInTime(t *testing.T) {
	addr, f := refusingThirdMoves(t)
	out, errOut, code := palace("loadtest", "clocks", "--addr", addr, "--games", "4", "--spread", "500ms",
		"--min-time", "2s", "--max-time", "2s", "--early", "0", "--racing", "1",
		"--race-before", "900ms", "--race-after", "0", "--service-keys", apptest.ServiceKeys)
	var rep clocksReport
	lastJSON(t, out, &rep)
	if f.injected.Load() == 0 {
		t.Fatalf("no move refused: %+v\n%s", rep, errOut)
	}
	if code == exitOK || rep.WronglyFlagged == 0 {
		t.Fatalf("%d in-time racing moves refused and their players flagged, yet exit %d; report %+v\n%s", f.injected.Load(), code, rep, errOut)
	}
}
