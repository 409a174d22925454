package main

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/apptest"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestLoadtestFloorCountsAProbeThatTimesOut: every second Probe is never
// answered, so the client's --call-timeout ends it with DeadlineExceeded
// long before the floor's half is over. That is a failure, counted, not
// the run's end: a floor client that stopped there would lower the
// floor's rate, flatter the ratio, and exit 0.
func TestLoadtestFloorCountsAProbeThatTimesOut(t *testing.T) {
	upstream := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	f := &fault{}
	var calls atomic.Int64
	f.probe = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.ProbeRequest) (*gamev1.ProbeResponse, error) {
		if calls.Add(1)%2 == 0 {
			f.injected.Add(1)
			<-ctx.Done() // a server that never answers this call
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return up.Probe(ctx, req)
	}
	addr := startFaultyProxy(t, upstream, f)
	out, errOut, code := palace("loadtest", "games", "--addr", addr, "--games", "3", "--duration", "4s",
		"--floor=true", "--call-timeout", "500ms", "--service-keys", apptest.ServiceKeys)
	var rep gamesReport
	lastJSON(t, out, &rep)
	t.Logf("%d probes never answered; report %+v", f.injected.Load(), rep)
	if f.injected.Load() == 0 {
		t.Fatalf("the fault never happened\n%s", errOut)
	}
	if !strings.Contains(errOut, "error: probe:") || rep.Errors == 0 || code != exitFail {
		t.Fatalf("probes that timed out mid-floor: errors %d, exit %d, no probe error reported; want them counted and exit %d\n%s",
			rep.Errors, code, exitFail, errOut)
	}
}
