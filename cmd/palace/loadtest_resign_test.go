package main

import (
	"context"
	"testing"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestTheLoadToolCatchesAResignationWonByTheResigner: the tool resigns
// every game still going on at the run's end as the first seat, so it
// knows who must win: the second seat, by resignation. A server that
// records every ending with the other side winning, alike in the
// resignation's answer, the streams' GameEnded and snapshots, and the
// final state, agrees with itself everywhere; only that knowledge shows
// the fault.
func TestTheLoadToolCatchesAResignationWonByTheResigner(t *testing.T) {
	upstream := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	f := &fault{}
	flip := func(g *gamev1.Game) {
		if g.GetResult() != nil {
			otherWinner(g.Result)
		}
	}
	f.resign = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.ResignRequest) (*gamev1.ResignResponse, error) {
		resp, err := up.Resign(ctx, req)
		if err == nil && resp.GetGame().GetResult() != nil {
			f.injected.Add(1)
			flip(resp.Game)
		}
		return resp, err
	}
	f.move = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
		resp, err := up.MakeMove(ctx, req)
		if err == nil {
			flip(resp.GetGame())
		}
		return resp, err
	}
	f.get = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
		resp, err := up.GetGame(ctx, req)
		if err == nil {
			flip(resp.GetGame())
		}
		return resp, err
	}
	f.events = func() eventFilter {
		return func(m *gamev1.StreamEventsResponse) ([]*gamev1.StreamEventsResponse, error) {
			if r := m.GetEvent().GetGameEnded().GetResult(); r != nil {
				otherWinner(r)
			}
			flip(m.GetSnapshot())
			return []*gamev1.StreamEventsResponse{m}, nil
		}
	}
	// --think keeps games going on to the run's end, where they resign.
	rep, errOut, code := gamesThrough(t, upstream, f, "--games", "4", "--think", "20ms")
	wantFaultCounted(t, f, rep, errOut, code)
}
