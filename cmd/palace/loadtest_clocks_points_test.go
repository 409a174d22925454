package main

import (
	"context"
	"testing"

	"github.com/palacehq/palace/pkg/apptest"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestLoadtestClocksFindsWrongPoints: every Janggi game flagged is read back
// with a point total no board without a capture has (0 : 0), and every
// Xiangqi one with points, which Xiangqi has none of. A result of a
// timeout is its winner, its method and, for Janggi, its points.
func TestLoadtestClocksFindsWrongPoints(t *testing.T) {
	upstream := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	f := &fault{}
	var janggi, xiangqi int
	f.get = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
		resp, err := up.GetGame(ctx, req)
		if err == nil && resp.GetGame().GetResult().GetMethod() == commonv1.EndMethod_END_METHOD_TIMEOUT {
			f.injected.Add(1)
			if resp.Game.Result.Points != nil {
				janggi++
			} else {
				xiangqi++
			}
			// Janggi: 0 : 0; Xiangqi: points where there are none.
			resp.Game.Result.Points = &commonv1.Points{}
			if resp.Game.GetKind() == commonv1.GameKind_GAME_KIND_XIANGQI {
				resp.Game.Result.Points = &commonv1.Points{First: 72, Second: 73.5}
			}
		}
		return resp, err
	}
	addr := startFaultyProxy(t, upstream, f)
	out, errOut, code := palace("loadtest", "clocks", "--addr", addr, "--games", "6", "--spread", "1s",
		"--min-time", "2s", "--max-time", "2s", "--service-keys", apptest.ServiceKeys)
	var rep clocksReport
	lastJSON(t, out, &rep)
	t.Logf("results read with points: %d, without: %d", janggi, xiangqi)
	if f.injected.Load() == 0 || code == exitOK {
		t.Fatalf("%d timeout results read back with wrong points; report %+v, exit %d; want exit %d\n%s", f.injected.Load(), rep, code, exitFail, errOut)
	}
}
