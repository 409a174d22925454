package game_test

import (
	"context"
	"testing"
	"time"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// playAs plays mv as side with a fresh request id, retrying while the
// service answers Unavailable (Redis restarting).
func playAs(t *testing.T, env *gametest.Env, tb *table, side commonv1.Side, mv string) *gamev1.MakeMoveResponse {
	t.Helper()
	req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: mv}}
	var resp *gamev1.MakeMoveResponse
	retrying(t, "move "+mv, func() (err error) {
		resp, err = env.Client.MakeMove(tb.as(side), req)
		return err
	})
	return resp
}

// TestARetryOfALostCommitIsAppliedAgain: a move is committed and answered,
// the answer never reaches the client, and Redis restarts from a snapshot
// that lacks the commit. The client's retry, with the same request id,
// reaches the process that made the commit and still holds its answer:
// that answer no longer stands, and the move is applied again, as any
// other process would apply it, instead of being answered as played and
// lost for good while the player waits for a reply that never comes.
func TestARetryOfALostCommitIsAppliedAgain(t *testing.T) {
	srv := redistest.Own(t, "--appendonly", "no")
	a := gametest.StartOn(t, srv.Addr, func(c *game.Config) { c.SigningKeys = keyOne })
	b := gametest.StartOn(t, srv.Addr, func(c *game.Config) { c.KeyPrefix = a.Config.KeyPrefix; c.SigningKeys = keyOne })
	tb := xiangqi(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	playAs(t, a, tb, commonv1.Side_SIDE_FIRST, "h3e3")
	playAs(t, a, tb, commonv1.Side_SIDE_SECOND, "h10g8")
	if err := srv.Client(t).Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "b1c3"}}
	if _, err := a.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), req); err != nil {
		t.Fatal(err)
	}
	if err := srv.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	var retried *gamev1.MakeMoveResponse
	retrying(t, "retry on the process that committed", func() (err error) {
		retried, err = a.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), req)
		return err
	})
	// What Redis holds, read by a process that caches nothing of the game.
	var g *gamev1.Game
	retrying(t, "read on another process", func() error {
		r, err := b.Client.GetGame(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.GetGameRequest{GameId: tb.id})
		g = r.GetGame()
		return err
	})
	if len(g.GetMoves()) != 3 || g.GetVersion() != retried.GetGame().GetVersion() {
		t.Fatalf("the retry of %s was answered as played at version %d, but the game holds %d moves at version %d, %v to move",
			req.GetMove().GetCoordinate(), retried.GetGame().GetVersion(), len(g.GetMoves()), g.GetVersion(), g.GetTurn())
	}
}
