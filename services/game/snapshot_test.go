package game_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/alicebob/miniredis/v2"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/game/gametest"
)

// TestAReadHoldsTheMovesOfItsVersion: a game's state and its moves are
// read in one step, so GetGame and a stream's snapshot never pair a state
// with the moves of another version. A client that applies such a
// snapshot, then the events after its version, plays a move twice.
//
// It runs on the in-process Redis of `make run` (miniredis), which runs one
// connection's pipelined commands one at a time, so that a commit from
// another connection can fall between two reads. A redis-server seldom
// lets one in, and does not promise not to.
func TestAReadHoldsTheMovesOfItsVersion(t *testing.T) {
	env := gametest.StartOn(t, miniredis.RunT(t).Addr(), nil)
	// The game being played, and its version less its moves: without seat
	// streams, every version after the start is one move, until the end.
	type playing struct {
		id     string
		offset uint64
	}
	var cur atomic.Pointer[playing]
	consistent := func(what string, p *playing, g *gamev1.Game) {
		if g.GetStatus() == commonv1.GameStatus_GAME_STATUS_ONGOING && g.GetVersion()-uint64(len(g.GetMoves())) != p.offset {
			t.Errorf("%s at version %d holds %d moves, want %d", what, g.GetVersion(), len(g.GetMoves()), g.GetVersion()-p.offset)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	read := func(read func(p *playing)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				if p := cur.Load(); p != nil {
					read(p)
				}
			}
		})
	}
	for range 2 {
		read(func(p *playing) {
			if r, err := env.Client.GetGame(ctx, &gamev1.GetGameRequest{GameId: p.id}); err == nil {
				consistent("GetGame", p, r.GetGame())
			}
		})
		read(func(p *playing) {
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			st, err := env.Client.StreamEvents(sctx, &gamev1.StreamEventsRequest{GameId: p.id, Snapshot: true})
			if err != nil {
				return
			}
			if m, err := st.Recv(); err == nil {
				consistent("a snapshot", p, m.GetSnapshot())
			}
		})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for moves := 0; moves < 600 && !t.Failed(); {
		x := xiangqi(t, env)
		g := x.get(t)
		cur.Store(&playing{id: x.id, offset: g.GetVersion() - uint64(len(g.GetMoves()))})
		for ; g.GetStatus() == commonv1.GameStatus_GAME_STATUS_ONGOING && moves < 600 && !t.Failed(); moves++ {
			legal := g.GetLegalMoves()
			g = x.move(t, legal[rng.IntN(len(legal))].GetCoordinate()).GetGame()
		}
	}
	stop()
	wg.Wait()
}
