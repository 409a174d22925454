package game_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// TestAJudgedInstantNeverPrecedesTheGameItIsAppliedTo: Red resigns
// on replica A while it is Black's turn. A reads the game and decides the
// resignation at instant J, but before its commit lands, replica B
// commits Black's move, at T2 > J. A's compare-and-set is lost, and A runs
// the resignation again on the game as Black's move left it: a game whose
// Red turn began at T2. It is judged then, not at J, which would end the
// game before its last move was played, the log's times running backwards.
func TestAJudgedInstantNeverPrecedesTheGameItIsAppliedTo(t *testing.T) {
	b := gametest.Start(t, func(c *game.Config) { c.SigningKeys = keyOne })
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	a := gametest.StartOn(t, proxy.Addr(), func(c *game.Config) {
		c.KeyPrefix, c.SigningKeys = b.Config.KeyPrefix, keyOne
	})
	fischer := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(5 * time.Minute)}}}
	tb := create(t, b, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true, TimeControl: fischer})
	tb.move(t, "h3e3")
	tb.move(t, "h10g8")
	tb.move(t, "b1c3") // Black to move

	proxy.Hold()
	done := make(chan error, 1)
	go func() {
		_, err := a.Client.Resign(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.ResignRequest{GameId: tb.id, RequestId: rid()})
		done <- err
	}()
	// The commit carries the state (its "seats"); let everything else by.
	isCommit := func(b []byte) bool { return bytes.Contains(b, []byte(`"seats"`)) }
	for stop := time.Now().Add(time.Second); !proxy.Holds(isCommit); {
		if time.Now().After(stop) {
			proxy.Restore()
			t.Fatal("replica A never got to commit the resignation")
		}
		proxy.Pass(func(b []byte) bool { return !isCommit(b) })
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := b.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "b10c8"}}); err != nil {
		proxy.Restore()
		t.Fatalf("Black's move: %v", err)
	}
	proxy.Restore()
	if err := <-done; err != nil {
		t.Fatalf("Red's resignation: %v", err)
	}

	g := tb.get(t)
	if n := len(g.GetMoves()); n != 4 || g.GetResult() == nil {
		t.Fatalf("want 4 moves and a result, got %d moves, result %v", n, g.GetResult())
	}
	lastMove := g.GetMoves()[3].GetPlayedAt().AsTime()
	ended := g.GetEndedAt().AsTime()
	// The log, read by a stream.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	evs, err := followEvents(ctx, b, tb.id)
	if err != nil {
		t.Fatal(err)
	}
	var prev time.Time
	var back []string
	for v := uint64(1); v <= g.GetVersion(); v++ {
		s := <-evs
		if s.err != nil {
			t.Fatal(s.err)
		}
		at := s.ev.GetTime().AsTime()
		if at.Before(prev) {
			back = append(back, s.ev.String())
		}
		prev = at
	}
	if ended.Before(lastMove) || len(back) > 0 {
		t.Fatalf("the game ended at %v, %v before its last move was played (%v); events whose time runs backwards: %v",
			ended.Format(time.StampMilli), lastMove.Sub(ended), lastMove.Format(time.StampMilli), back)
	}
}
