package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/palacehq/palace/pkg/apptest"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// shiftTimes moves every Timestamp in m by d.
func shiftTimes(m protoreflect.Message, d time.Duration) {
	if ts, ok := m.Interface().(*timestamppb.Timestamp); ok {
		*ts = *timestamppb.New(ts.AsTime().Add(d))
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				shiftTimes(v.List().Get(i).Message(), d)
			}
		case fd.IsMap():
		case fd.Message() != nil:
			shiftTimes(v.Message(), d)
		}
		return true
	})
}

// TestLoadtestClocksAllowsForReplicasClocksApart: two game replicas, the
// second's clock 10 ms ahead of the first's (each replica's clock is Redis
// TIME read at an anchor, behind by that reply's latency, plus its own
// monotonic clock since: replicas differ by milliseconds), both judging
// every move rightly in their own clock. The tool measures its clock
// offset against one replica, and judged a racing move the other refused
// just after its deadline as refused before its last in-time instant: a
// wrong flag where the servers did right.
func TestLoadtestClocksAllowsForReplicasClocksApart(t *testing.T) {
	upstream := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	const skew = 10 * time.Millisecond
	faithful := startFaultyProxy(t, upstream, &fault{})
	f := &fault{}
	f.move = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
		r, err := up.MakeMove(ctx, req)
		if err == nil {
			shiftTimes(r.ProtoReflect(), skew)
		}
		return r, err
	}
	f.get = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
		r, err := up.GetGame(ctx, req)
		if err == nil {
			shiftTimes(r.ProtoReflect(), skew)
		}
		return r, err
	}
	f.create = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.CreateGameRequest) (*gamev1.CreateGameResponse, error) {
		r, err := up.CreateGame(ctx, req)
		if err == nil {
			shiftTimes(r.ProtoReflect(), skew)
		}
		return r, err
	}
	ahead := startFaultyProxy(t, upstream, f)
	out, errOut, code := palace("loadtest", "clocks", "--addr", faithful+","+ahead, "--games", "32", "--spread", "1s",
		"--min-time", "2s", "--max-time", "2s", "--early", "0", "--racing", "1",
		"--race-before", "12ms", "--race-after", "0s", "--service-keys", apptest.ServiceKeys)
	var rep clocksReport
	lastJSON(t, out, &rep)
	t.Logf("exit %d report %+v\n%s", code, rep, errOut)
	if code != exitOK || rep.WronglyFlagged != 0 {
		t.Fatalf("servers right in their own clocks, 10 ms apart; exit %d, report %+v\n%s", code, rep, errOut)
	}
}
