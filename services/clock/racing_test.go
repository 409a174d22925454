package clock_test

import (
	"bytes"
	"testing"
	"time"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// TestAMoveReadInTimeIsNotFlaggedByARacingCommit: Red's move reaches game
// replica A 1.5 s before Red's deadline and A reads the game in time, but
// before A's commit lands, replica B commits Black's draw offer on the same
// game (a seat connecting there, or a period the sweeper announces, would
// do the same). A's compare-and-set is lost and A runs the move again on a
// fresh read. The move is judged at the instant it was first run, not at
// that read, which came after the deadline.
func TestAMoveReadInTimeIsNotFlaggedByARacingCommit(t *testing.T) {
	b := startGame(t, true)
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	a := gametest.StartOn(t, proxy.Addr(), func(c *game.Config) {
		c.LagMaxPerMove, c.LagBank, c.LagRefill = 0, 0, 0
		c.KeyPrefix, c.SigningKeys = b.Config.KeyPrefix, b.Config.SigningKeys
	})
	tb := create(t, b, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer(4 * time.Second)})
	dl := deadlineOf(t, tb.play(t, firstMoves...))

	// Early enough that A reads the game, and B commits, before the
	// deadline even on a loaded machine.
	time.Sleep(time.Until(dl.Add(-1500 * time.Millisecond)))
	proxy.Hold()
	sent := time.Now()
	type result struct {
		resp *gamev1.MakeMoveResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := a.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.MakeMoveRequest{
			GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: thirdMove}})
		done <- result{resp, err}
	}()
	// Let A read the game; hold its writes (the deadline entry, then the
	// commit) once it has decided the move.
	isWrite := func(b []byte) bool { return bytes.Contains(b, []byte("ZADD")) || bytes.Contains(b, []byte("zadd")) }
	for stop := time.Now().Add(time.Second); !proxy.Holds(isWrite); {
		if time.Now().After(stop) {
			proxy.Restore()
			t.Fatal("replica A never got to write the move")
		}
		proxy.Pass(func(b []byte) bool { return !isWrite(b) })
		time.Sleep(time.Millisecond)
	}
	// Meanwhile replica B commits something else on the game, in time.
	if _, err := b.Client.OfferDraw(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.OfferDrawRequest{GameId: tb.id, RequestId: rid()}); err != nil {
		proxy.Restore()
		t.Fatalf("Black's draw offer: %v", err)
	}
	time.Sleep(time.Until(dl.Add(100 * time.Millisecond)))
	proxy.Restore()
	r := <-done
	if !sent.Before(dl) {
		t.Fatalf("the test sent the move at %v, not before the deadline %v", sent, dl)
	}
	if r.err != nil {
		g := tb.get(t)
		t.Fatalf("Red's move reached the server %v before the deadline, and was read in time, yet: %v (game %v by %v, ended at %v, %v after the deadline)",
			dl.Sub(sent).Round(time.Millisecond), r.err, g.GetStatus(), g.GetResult().GetMethod(), g.GetEndedAt().AsTime(), g.GetEndedAt().AsTime().Sub(dl))
	}
}
