package main

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// TestClocksCheckBoundsLatenessByCheckAfter: a game whose read
// came late (a slow or retried GetGame) and shows a flag 8 s past its
// instant, with --check-after 2s, was still running CheckAfter past its
// flag instant: missed, as rejudge would count it, not flagged.
func TestClocksCheckBoundsLatenessByCheckAfter(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const budget, grace = 2 * time.Second, time.Second
	deadline := start.Add(budget + grace)
	g := &clockGame{id: "g", behaviour: "idle", deadline: deadline, budget: budget, grace: grace}
	game := &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_ENDED, Moves: make([]*gamev1.MoveRecord, 2),
		EndedAt: timestamppb.New(deadline.Add(8 * time.Second)),
		Result:  &commonv1.Result{Winner: commonv1.Winner_WINNER_SECOND, Method: commonv1.EndMethod_END_METHOD_TIMEOUT}}
	l := &clocksLoad{opt: clocksOptions{checkAfter: 2 * time.Second, concurrency: 1}}
	l.check(t.Context(), &gameRoute{replicas: [][]gamev1.GameServiceClient{{readBack{game: game}}}}, g)
	rep := clocksReport{Games: 1, Checked: l.checked.Load(), Flagged: l.flagged.Load(), Missed: l.missed.Load(),
		WronglyFlagged: l.wrong.Load(), Errors: l.errs.Load()}
	if !rep.faulty() {
		t.Fatalf("a flag 8 s late with --check-after 2s passes: %+v, lateness %v ms", rep, l.lateness)
	}
}
