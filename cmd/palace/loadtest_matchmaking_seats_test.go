package main

import (
	"testing"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// TestMatchmakingReportCountsAPlayerSeatedNowhere: a and b are told they
// play each other in g1, a first, b second; the game read back seats a on
// the first side twice and b nowhere. b was not seated as reported, so
// both tickets must count as wrongly paired.
func TestMatchmakingReportCountsAPlayerSeatedNowhere(t *testing.T) {
	first, second := commonv1.Side_SIDE_FIRST, commonv1.Side_SIDE_SECOND
	pool := mmPools(false)[0]
	matched := func(p string, side commonv1.Side, opponent string) *mmTicket {
		return matchedTicket(t, p, 0, "g1", side, opponent)
	}
	for name, seats := range map[string][]*gamev1.Seat{
		"a on both seats":       {{Side: first, PlayerId: "a"}, {Side: first, PlayerId: "a"}},
		"second seat left open": {{Side: first, PlayerId: "a"}, {}},
	} {
		t.Run(name, func(t *testing.T) {
			game := &gamev1.Game{Kind: pool.kind, TimeControl: pool.tc, Seats: seats}
			l := &mmLoad{game: readBack{game: game}, pools: mmPools(false),
				tickets: []*mmTicket{matched("a", first, "b"), matched("b", second, "a")}}
			rep := l.report(t.Context(), 0, 1)
			if rep.GamesChecked != 1 || rep.DoublePaired != 2 || !rep.faulty() {
				t.Fatalf("game seating b nowhere taken for right: %d games checked, %d wrongly paired, faulty %v; want 1, 2, true",
					rep.GamesChecked, rep.DoublePaired, rep.faulty())
			}
		})
	}
}
