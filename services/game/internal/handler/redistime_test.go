package handler

import (
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/auth"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// A process that has just started plays the first moves of a game it
// created on its cached state, without reading the game back. Those moves
// go by Redis' time too, as the sweeper does, not by the host's clock: a
// host whose clock is behind would otherwise give its players time, and
// one whose clock is ahead would flag them early.
func TestAFreshProcessGoesByRedisTime(t *testing.T) {
	const skew = time.Hour
	rdb := redistest.Client(t)
	rdb.AddHook(redistest.ClockApart(skew))
	ring, _, err := auth.KeyringFromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	h := newRedisHandlerOn(t, rdb, redistest.Prefix(t), ring)
	id, red, _ := newXiangqi(t, h)
	resp, err := h.MakeMove(red, &gamev1.MakeMoveRequest{GameId: id, RequestId: "m1", Move: &commonv1.Move{Coordinate: "h3e3"}})
	if err != nil {
		t.Fatal(err)
	}
	if ahead := resp.GetMove().GetPlayedAt().AsTime().Sub(time.Now()); ahead < skew-time.Minute || ahead > skew+time.Minute {
		t.Fatalf("the move was played %v ahead of this host's clock, want Redis' %v", ahead, skew)
	}
}
