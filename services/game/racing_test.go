package game_test

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// TestRacingMovesOfTwoProcessesApplyOnce races the same move through two
// processes of the service: each one serialises its own commands of a
// game, so only the commit's compare-and-set in Redis keeps the two from
// both applying.
func TestRacingMovesOfTwoProcessesApplyOnce(t *testing.T) {
	a := gametest.Start(t, func(c *game.Config) { c.SigningKeys = keyOne })
	b := gametest.Start(t, func(c *game.Config) { c.KeyPrefix = a.Config.KeyPrefix; c.SigningKeys = keyOne })
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	rng := rand.New(rand.NewPCG(3, 4))
	tb := xiangqi(t, a)
	g := tb.get(t)
	for r := range rounds {
		if g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
			tb = xiangqi(t, a)
			g = tb.get(t)
		}
		mv := g.GetLegalMoves()[rng.IntN(len(g.GetLegalMoves()))].GetCoordinate()
		ctx := tb.as(g.GetTurn())
		var wg sync.WaitGroup
		var ok atomic.Int32
		errs := make([]error, 2)
		for i, env := range []*gametest.Env{a, b} {
			wg.Go(func() {
				_, err := env.Client.MakeMove(ctx, &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: mv}})
				if err == nil {
					ok.Add(1)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		if ok.Load() != 1 {
			t.Fatalf("round %d: %d of 2 racing moves applied (errors %v)", r, ok.Load(), errs)
		}
		for i, err := range errs {
			if err != nil && status.Code(err) != codes.FailedPrecondition {
				t.Fatalf("round %d: loser (process %d) got %v, want FailedPrecondition", r, i, err)
			}
		}
		next := tb.get(t)
		if len(next.GetMoves()) != len(g.GetMoves())+1 {
			t.Fatalf("round %d: %d moves after one race, had %d", r, len(next.GetMoves()), len(g.GetMoves()))
		}
		g = next
	}
}
