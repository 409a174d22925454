package main

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestTheLoadToolCatchesAlteredContent: faults in what a stream or the
// final state says, each at the right version and ply with the right
// coordinate, so that only the content differs from what the server
// acknowledged (a move's record, a commit, an event's kind, a snapshot's
// moves or position, the final position or records). Each must show in
// some fault counter and fail the run: an app shown any of them shows
// another game than the one played.
func TestTheLoadToolCatchesAlteredContent(t *testing.T) {
	upstream := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	tests := []struct {
		name  string
		fault func() *fault
		args  []string
	}{
		// The move at ply 3 streamed with another notation, side, check,
		// capture and pass flag.
		{name: "event-move-record-altered", fault: func() *fault {
			return editEvents(func(m *gamev1.StreamEventsResponse) bool {
				mp := m.GetEvent().GetMovePlayed()
				if mp.GetPly() != 3 {
					return false
				}
				mp.Notation += "?"
				mp.Check = !mp.Check
				mp.Pass = true
				mp.Captured = "k"
				if mp.Side == commonv1.Side_SIDE_FIRST {
					mp.Side = commonv1.Side_SIDE_SECOND
				} else {
					mp.Side = commonv1.Side_SIDE_FIRST
				}
				return true
			})
		}, args: []string{"--reconnect-rate", "0"}},
		// The move at ply 3 streamed with clocks the game never had (an
		// untimed game).
		{name: "event-clocks-altered", fault: func() *fault {
			return editEvents(func(m *gamev1.StreamEventsResponse) bool {
				mp := m.GetEvent().GetMovePlayed()
				if mp.GetPly() != 3 {
					return false
				}
				mp.Clocks = &commonv1.ClockSnapshot{Running: commonv1.Side_SIDE_FIRST,
					First: &commonv1.PlayerClock{}, Second: &commonv1.PlayerClock{}}
				return true
			})
		}, args: []string{"--reconnect-rate", "0"}},
		// The commit of the move event at ply 3 is not the one the server
		// wrote: a client that resumes after it is refused, or resumes a
		// history it never had.
		{name: "event-commit-altered", fault: func() *fault {
			return editEvents(func(m *gamev1.StreamEventsResponse) bool {
				e := m.GetEvent()
				if e.GetMovePlayed().GetPly() != 3 {
					return false
				}
				e.Commit = "forged-" + e.Commit
				return true
			})
		}, args: []string{"--reconnect-rate", "0"}},
		// A seat's own presence event turned into a draw offer nobody
		// made, or moves undone in a game with no AI: the versions all in
		// order, the content invented.
		{name: "event-kind-replaced", fault: func() *fault {
			return editEvents(func(m *gamev1.StreamEventsResponse) bool {
				e := m.GetEvent()
				pc := e.GetPlayerConnection()
				if pc == nil {
					return false
				}
				if pc.GetConnected() {
					e.Kind = &gamev1.Event_DrawOffered{DrawOffered: &gamev1.DrawOffered{Side: pc.GetSide()}}
				} else {
					e.Kind = &gamev1.Event_MovesUndone{MovesUndone: &gamev1.MovesUndone{}}
				}
				return true
			})
		}},
		// The final state lists every move acknowledged, but its position
		// is the start: a final state that disagrees with its moves.
		{name: "final-position-altered", fault: editFinalState(func(g *gamev1.Game) { g.Position = g.GetStart() })},
		// The final state's record of ply 2 with another notation and a
		// capture: not only its coordinate must be the one played.
		{name: "final-move-record-altered", fault: editFinalState(func(g *gamev1.Game) {
			g.Moves[1].Notation += "?"
			g.Moves[1].Captured = "k"
		})},
		// A later snapshot without a move the stream had before: the
		// snapshot replaces what the client had, so its app loses ply 2.
		// (Only snapshots of 6 moves or more, which come from
		// reconnections, not from a stream's first connection.)
		{name: "snapshot-missing-a-move", fault: func() *fault {
			return editEvents(func(m *gamev1.StreamEventsResponse) bool {
				g := m.GetSnapshot()
				if len(g.GetMoves()) < 6 {
					return false
				}
				g.Moves = append(g.Moves[:1:1], g.Moves[2:]...)
				return true
			})
		}, args: []string{"--reconnect-rate", "0.3"}},
		// A snapshot whose position is not its moves'.
		{name: "snapshot-position-altered", fault: func() *fault {
			return editEvents(func(m *gamev1.StreamEventsResponse) bool {
				g := m.GetSnapshot()
				if len(g.GetMoves()) == 0 {
					return false
				}
				g.Position = g.GetStart()
				return true
			})
		}, args: []string{"--reconnect-rate", "0.3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.fault()
			rep, errOut, code := gamesThrough(t, upstream, f, tc.args...)
			wantFaultCounted(t, f, rep, errOut, code)
		})
	}
}

// editFinalState reads back every game of two moves or more changed by
// edit.
func editFinalState(edit func(*gamev1.Game)) func() *fault {
	return func() *fault {
		f := &fault{}
		f.get = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
			resp, err := up.GetGame(ctx, req)
			if err != nil || len(resp.GetGame().GetMoves()) < 2 {
				return resp, err
			}
			f.injected.Add(1)
			edit(resp.Game)
			return resp, nil
		}
		return f
	}
}

// TestTheLoadToolChecksStreamsWhenTheFinalReadFails: a game whose final
// read fails still has its streams checked for all that does not need
// the final state. A stream that delivered a move twice, with an
// unrelated error in the final read, must show duplicated, not the error
// alone: a fault-injection run that expects some errors (a Redis restart)
// and asserts duplicated == 0 would pass otherwise.
func TestTheLoadToolChecksStreamsWhenTheFinalReadFails(t *testing.T) {
	upstream := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	f := doubleFirstMoveEvent()
	f.get = func(context.Context, gamev1.GameServiceClient, *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
		return nil, status.Error(codes.Internal, "read failed (the faulty proxy)")
	}
	rep, errOut, _ := gamesThrough(t, upstream, f, "--retry-rate", "0", "--reconnect-rate", "0")
	if f.injected.Load() == 0 || rep.Moves == 0 {
		t.Fatalf("no event doubled: %+v\n%s", rep, errOut)
	}
	if rep.Duplicated == 0 {
		t.Fatalf("%d move events delivered twice, final reads failed: duplicated %d, errors %d; the doubled events went unchecked",
			f.injected.Load(), rep.Duplicated, rep.Errors)
	}
}
