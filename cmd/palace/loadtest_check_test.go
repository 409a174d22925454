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
	l.check(final, acked, 0, ended(good, doubledSnap))
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
	l.check(final, acked, 0, ended(good, swapped))
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
	l.check(final, acked, 0, nil)
	// The same move streamed, under a version of its own that the final
	// state's version accounts for.
	stream := []seen{ev(1, played{}), ev(2, played{}), ev(3, played{1, "h3e3"}), ev(4, played{2, "h8e8"}), ev(5, played{0, "a1a2"})}
	var l2 gamesLoad
	l2.check(&gamev1.Game{Version: 5, Moves: moves}, acked, 0, ended(stream))
	if l.dup.Load() != 1 || l2.dup.Load() != 1 {
		t.Fatalf("an unacknowledged move at ply 0: dup %d in the final state, %d in a stream; want 1 each", l.dup.Load(), l2.dup.Load())
	}
}
