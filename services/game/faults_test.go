package game_test

import (
	"context"
	"testing"
	"time"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// TestStreamCatchesUpAfterLosingRedis: the process serving a stream loses
// Redis (every connection, its subscription with them) while another
// process commits a move, whose notification it therefore never gets.
// Once Redis is back, the stream must deliver that move without waiting
// for another event, then the next one, each exactly once and in order.
func TestStreamCatchesUpAfterLosingRedis(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	a := gametest.StartOn(t, proxy.Addr(), func(c *game.Config) { c.SigningKeys = keyOne })
	b := gametest.Start(t, func(c *game.Config) { c.KeyPrefix = a.Config.KeyPrefix; c.SigningKeys = keyOne })
	tb := xiangqi(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A spectator's stream on a: it records no presence, so a commits
	// nothing of its own.
	st, err := a.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	next := func(what string) *gamev1.Event {
		t.Helper()
		for {
			m, err := st.Recv()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if e := m.GetEvent(); e != nil {
				if e.GetVersion() != last+1 {
					t.Fatalf("%s: version %d after %d", what, e.GetVersion(), last)
				}
				last = e.GetVersion()
				return e
			}
		}
	}
	for last < tb.get(t).GetVersion() {
		next("events before the cut")
	}

	proxy.Cut()
	first := tb.move(t, "h3e3").GetGame().GetVersion()
	// Long enough for a's subscription to have noticed and to be retrying.
	time.Sleep(300 * time.Millisecond)
	proxy.Restore()

	e := next("the move committed while Redis was away")
	if e.GetVersion() != first || e.GetMovePlayed().GetMove().GetCoordinate() != "h3e3" {
		t.Fatalf("got %v, want h3e3 at version %d", e, first)
	}
	second := tb.move(t, "h10g8").GetGame().GetVersion()
	e = next("the move after Redis came back")
	if e.GetVersion() != second || e.GetMovePlayed().GetMove().GetCoordinate() != "h10g8" {
		t.Fatalf("got %v, want h10g8 at version %d", e, second)
	}
}
