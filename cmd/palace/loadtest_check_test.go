package main

import (
	"slices"
	"testing"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// TestCheckCountsAMoveDoubledInASnapshot: a snapshot whose list of moves
// has a move twice shows the client the move twice. A move the stream sent
// before may be in its later snapshots, but once in each.
func TestCheckCountsAMoveDoubledInASnapshot(t *testing.T) {
	final := &gamev1.Game{Version: 4, Moves: []*gamev1.MoveRecord{
		{Ply: 1, Move: &commonv1.Move{Coordinate: "h3e3"}},
		{Ply: 2, Move: &commonv1.Move{Coordinate: "h8e8"}},
	}}
	acked := []played{{1, "h3e3"}, {2, "h8e8"}}
	good := []seen{ev(1, played{}), ev(2, played{}), ev(3, played{1, "h3e3"}), ev(4, played{2, "h8e8"})}
	// Second seat: events 1 and 2, then a reconnection with a snapshot at
	// version 4 whose move list has ply 1 twice.
	doubledSnap := slices.Concat(good[:2], []seen{
		{version: 4, snapshot: true},
		{version: 4, inSnapshot: true, played: played{1, "h3e3"}},
		{version: 4, inSnapshot: true, played: played{1, "h3e3"}},
		{version: 4, inSnapshot: true, played: played{2, "h8e8"}},
	})
	var l gamesLoad
	l.check(final, acked, played{}, ended(good, doubledSnap))
	if l.dup.Load() != 1 {
		t.Fatalf("a snapshot listing ply 1 twice: dup %d (lost %d gaps %d errors %d), want dup 1",
			l.dup.Load(), l.lost.Load(), l.gaps.Load(), l.errs.Load())
	}
}

// TestCheckCountsMovesStreamedOutOfOrder: a stream whose versions run in
// order but whose move events carry the moves swapped (version 3 is ply 2,
// version 4 is ply 1) delivers the game out of order: an app that applies
// events in version order would replay another game.
func TestCheckCountsMovesStreamedOutOfOrder(t *testing.T) {
	final := &gamev1.Game{Version: 4, Moves: []*gamev1.MoveRecord{
		{Ply: 1, Move: &commonv1.Move{Coordinate: "h3e3"}},
		{Ply: 2, Move: &commonv1.Move{Coordinate: "h8e8"}},
	}}
	acked := []played{{1, "h3e3"}, {2, "h8e8"}}
	good := []seen{ev(1, played{}), ev(2, played{}), ev(3, played{1, "h3e3"}), ev(4, played{2, "h8e8"})}
	swapped := []seen{ev(1, played{}), ev(2, played{}), ev(3, played{2, "h8e8"}), ev(4, played{1, "h3e3"})}
	var l gamesLoad
	l.check(final, acked, played{}, ended(good, swapped))
	if l.lost.Load()+l.dup.Load()+l.gaps.Load()+l.errs.Load() == 0 {
		t.Fatalf("moves streamed out of order (ply 2 at version 3, ply 1 at version 4): lost %d dup %d gaps %d errors %d, want the fault counted",
			l.lost.Load(), l.dup.Load(), l.gaps.Load(), l.errs.Load())
	}
}

// TestCheckCountsAnUnacknowledgedMoveAtPlyZero: a move nobody played whose
// record carries ply 0 (an unset ply) is counted, in the final state and
// in a stream, as at any other ply: unsure 0 is no failed call, not a
// move that may have been applied.
func TestCheckCountsAnUnacknowledgedMoveAtPlyZero(t *testing.T) {
	acked := []played{{1, "h3e3"}, {2, "h8e8"}}
	moves := []*gamev1.MoveRecord{
		{Ply: 1, Move: &commonv1.Move{Coordinate: "h3e3"}},
		{Ply: 2, Move: &commonv1.Move{Coordinate: "h8e8"}},
	}
	// The final state has a third move nobody played, its ply unset.
	final := &gamev1.Game{Version: 4, Moves: append(slices.Clone(moves), &gamev1.MoveRecord{Ply: 0, Move: &commonv1.Move{Coordinate: "a1a2"}})}
	var l gamesLoad
	l.check(final, acked, played{}, nil)
	// The same move streamed, under a version of its own that the final
	// state's version accounts for.
	stream := []seen{ev(1, played{}), ev(2, played{}), ev(3, played{1, "h3e3"}), ev(4, played{2, "h8e8"}), ev(5, played{0, "a1a2"})}
	var l2 gamesLoad
	l2.check(&gamev1.Game{Version: 5, Moves: moves}, acked, played{}, ended(stream))
	if l.dup.Load() != 1 || l2.dup.Load() != 1 {
		t.Fatalf("an unacknowledged move at ply 0: dup %d in the final state, %d in a stream; want 1 each", l.dup.Load(), l2.dup.Load())
	}
}

// rec is a move record as the server's answers, events and reads carry it.
func rec(ply uint32, coord string) *gamev1.MoveRecord {
	side := commonv1.Side_SIDE_FIRST
	if ply%2 == 0 {
		side = commonv1.Side_SIDE_SECOND
	}
	return &gamev1.MoveRecord{Ply: ply, Side: side, Move: &commonv1.Move{Coordinate: coord}, Notation: "n" + coord}
}

// commitOf is the commit of version v in these tests.
func commitOf(v uint64) string { return "c" + string(rune('0'+v)) }

// moveEvent is a streamed move at version v, with its record and commit.
func moveEvent(v uint64, ply uint32, coord string) seen {
	return seen{version: v, played: played{ply, coord}, rec: rec(ply, coord), commit: commitOf(v)}
}

// otherEvent is a streamed event at version v that is no move.
func otherEvent(v uint64) seen { return seen{version: v, commit: commitOf(v)} }

// twoMovesTold is what the answers of a clean two-move game said: created
// at version 2, ply 1 h3e3 at version 3, ply 2 h8e8 at version 4.
func twoMovesTold() *told {
	var tl told
	tl.state(&gamev1.Game{Version: 2, Commit: commitOf(2)}, 0)
	tl.answered(&gamev1.MakeMoveResponse{Move: rec(1, "h3e3"), Game: &gamev1.Game{Version: 3, Commit: commitOf(3)}}, 1, "h3e3")
	tl.answered(&gamev1.MakeMoveResponse{Move: rec(2, "h8e8"), Game: &gamev1.Game{Version: 4, Commit: commitOf(4)}}, 2, "h8e8")
	return &tl
}

// faults are the counts of a check: lost, duplicated, gaps, errors.
type faults struct{ lost, dup, gaps, errs int64 }

func faultsOf(l *gamesLoad) faults {
	return faults{l.lost.Load(), l.dup.Load(), l.gaps.Load(), l.errs.Load()}
}

// A stream cut off after showing another move than the one acknowledged,
// in an event or in a snapshot, showed its player another game: lost,
// though the stream did not end whole. Only streams that ended whole were
// once compared with what was acknowledged, so a run under injected faults
// (where some errors are expected) passed with moves shown wrongly.
func TestCheckCountsAWrongMoveOnACutOffStream(t *testing.T) {
	final := &gamev1.Game{Version: 5, Commit: commitOf(5), Moves: []*gamev1.MoveRecord{rec(1, "h3e3"), rec(2, "h8e8")}}
	acked := []played{{1, "h3e3"}, {2, "h8e8"}}
	good := []seen{otherEvent(1), otherEvent(2), moveEvent(3, 1, "h3e3"), moveEvent(4, 2, "h8e8"), otherEvent(5)}
	for _, tc := range []struct {
		name string
		cut  []seen
		want faults
	}{
		{"the right move", good[:4], faults{}},
		{"another move", []seen{otherEvent(1), otherEvent(2), moveEvent(3, 1, "h3e3"), moveEvent(4, 2, "a1a2")}, faults{lost: 1}},
		{"another move in a snapshot", []seen{otherEvent(1), otherEvent(2), moveEvent(3, 1, "h3e3"),
			{version: 4, snapshot: true, commit: commitOf(4)},
			{version: 4, inSnapshot: true, played: played{1, "h3e3"}, rec: rec(1, "h3e3")},
			{version: 4, inSnapshot: true, played: played{2, "a1a2"}, rec: rec(2, "a1a2")},
		}, faults{lost: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			streams := []streamed{{events: good, complete: true}, {events: tc.cut}}
			var l gamesLoad
			l.check(final, acked, played{}, streams)
			l.checkTold("g", twoMovesTold(), final, streams)
			if got := faultsOf(&l); got != tc.want {
				t.Fatalf("a stream cut off after %s at ply 2: %+v, want %+v (%v)", tc.name, got, tc.want, l.err)
			}
		})
	}
}

// The move of a failed call may stand or not, but it is the move sent,
// and the final state and the streams agree on it. Any move at its ply
// once passed, and so did one streamed to both seats but missing from the
// game.
func TestCheckHoldsTheFailedMoveToWhatWasSent(t *testing.T) {
	acked := []played{{1, "h3e3"}, {2, "h8e8"}}
	sent := played{3, "h2e2"}
	stream := func(third played) []seen {
		return []seen{ev(1, played{}), ev(2, played{}), ev(3, played{1, "h3e3"}), ev(4, played{2, "h8e8"}), ev(5, third), ev(6, played{})}
	}
	withThird := &gamev1.Game{Version: 6, Moves: []*gamev1.MoveRecord{rec(1, "h3e3"), rec(2, "h8e8"), rec(3, "h2e2")}}
	for _, tc := range []struct {
		name    string
		final   *gamev1.Game
		streams []streamed
		want    faults
	}{
		{"applied, stored and streamed", withThird, ended(stream(sent), stream(sent)), faults{}},
		{"not applied", &gamev1.Game{Version: 5, Moves: withThird.Moves[:2]},
			ended(append(stream(sent)[:4:4], otherEvent(5)), append(stream(sent)[:4:4], otherEvent(5))), faults{}},
		{"another move stored and streamed", &gamev1.Game{Version: 6, Moves: []*gamev1.MoveRecord{rec(1, "h3e3"), rec(2, "h8e8"), rec(3, "a1a2")}},
			ended(stream(played{3, "a1a2"}), stream(played{3, "a1a2"})), faults{dup: 3}},
		{"streamed to both seats, not stored", &gamev1.Game{Version: 6, Moves: withThird.Moves[:2]},
			ended(stream(sent), stream(sent)), faults{dup: 2}},
		{"stored, not streamed", withThird,
			ended(stream(played{}), stream(sent)), faults{lost: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l gamesLoad
			l.check(tc.final, acked, sent, tc.streams)
			if got := faultsOf(&l); got != tc.want {
				t.Fatalf("the failed move %s: %+v, want %+v (%v)", tc.name, got, tc.want, l.err)
			}
		})
	}
}

// A stream that sends the game's end and then more (moves, a second end)
// showed "game over" and went on: a gap, once. Only an end with another
// result than the game's was once caught.
func TestCheckCountsEventsAfterTheEnd(t *testing.T) {
	res := &commonv1.Result{Winner: commonv1.Winner_WINNER_SECOND, Method: commonv1.EndMethod_END_METHOD_RESIGNATION}
	final := &gamev1.Game{Version: 5, Result: res, Moves: []*gamev1.MoveRecord{rec(1, "h3e3"), rec(2, "h8e8")}}
	acked := []played{{1, "h3e3"}, {2, "h8e8"}}
	endAt := func(v uint64) seen { return seen{version: v, ended: true, result: res} }
	good := []seen{ev(1, played{}), ev(2, played{}), ev(3, played{1, "h3e3"}), ev(4, played{2, "h8e8"}), endAt(5)}
	early := slices.Concat([]seen{ev(1, played{}), endAt(2)}, good[2:])
	var l gamesLoad
	l.check(final, acked, played{}, ended(good, early))
	if got, want := faultsOf(&l), (faults{gaps: 1}); got != want {
		t.Fatalf("a stream that ended the game at version 2, then sent two moves and the end again: %+v, want %+v", got, want)
	}
}

// Moves listed out of order, in the final state or in a snapshot, build
// another game in an app replaying them: a gap, once per list. Lists were
// once read by ply alone.
func TestCheckCountsMovesListedOutOfOrder(t *testing.T) {
	acked := []played{{1, "h3e3"}, {2, "h8e8"}}
	inOrder := []*gamev1.MoveRecord{rec(1, "h3e3"), rec(2, "h8e8")}
	good := []seen{ev(1, played{}), ev(2, played{}), ev(3, played{1, "h3e3"}), ev(4, played{2, "h8e8"})}
	var l gamesLoad
	l.check(&gamev1.Game{Version: 4, Moves: []*gamev1.MoveRecord{inOrder[1], inOrder[0]}}, acked, played{}, ended(good, good))
	if got, want := faultsOf(&l), (faults{gaps: 1}); got != want {
		t.Errorf("a final state listing ply 2 before ply 1: %+v, want %+v", got, want)
	}
	snap := []seen{
		{version: 4, snapshot: true},
		{version: 4, inSnapshot: true, played: played{2, "h8e8"}},
		{version: 4, inSnapshot: true, played: played{1, "h3e3"}},
	}
	var l2 gamesLoad
	l2.check(&gamev1.Game{Version: 4, Moves: inOrder}, acked, played{}, ended(good, snap))
	if got, want := faultsOf(&l2), (faults{gaps: 1}); got != want {
		t.Errorf("a snapshot listing ply 2 before ply 1: %+v, want %+v", got, want)
	}
}
