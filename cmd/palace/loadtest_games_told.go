package main

import (
	"cmp"
	"slices"

	"google.golang.org/protobuf/proto"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// told is what the server's answers said of one game: the tool played
// every move of it, so each stream and the final state must say the same.
// A stream that only had its versions and coordinates checked could
// deliver another game (other notations, sides, captures, commits, a
// position that is not its moves') and pass.
type told struct {
	// moves holds each move's answer by ply (moves[ply-1]); an empty one
	// where no answer can be trusted (it echoed another move, or two
	// answers to the same request differed: faults counted already).
	moves []toldMove
	// states are the states the answers gave, in the order of their
	// versions.
	states []toldState
}

type toldMove struct {
	// rec is the move as recorded; nil when unknown.
	rec *gamev1.MoveRecord
	// version and commit are those of the state after the move: its
	// MovePlayed event has that commit (a commit may make several events,
	// a move and the end it brings), and a snapshot at that version or
	// later has the move.
	version uint64
	commit  string
}

type toldState struct {
	version  uint64
	commit   string
	position *commonv1.Position
	// plies is the number of moves played at version, -1 when unknown (a
	// move whose call failed may stand).
	plies int
}

// state adds an answer's game, played plies moves in (-1: unknown).
func (t *told) state(g *gamev1.Game, plies int) {
	if g == nil {
		return
	}
	t.states = append(t.states, toldState{version: g.GetVersion(), commit: g.GetCommit(), position: g.GetPosition(), plies: plies})
}

// answered adds the answer to the move mv at ply: its record only if it
// echoes that move, its game in any case.
func (t *told) answered(resp *gamev1.MakeMoveResponse, ply uint32, mv string) {
	rec := resp.GetMove()
	if rec.GetPly() != ply || rec.GetMove().GetCoordinate() != mv || resp.GetGame() == nil {
		t.moves = append(t.moves, toldMove{})
		t.state(resp.GetGame(), -1)
		return
	}
	t.moves = append(t.moves, toldMove{rec: rec, version: resp.GetGame().GetVersion(), commit: resp.GetGame().GetCommit()})
	t.state(resp.GetGame(), int(ply))
}

// move is the answer to the move at ply, with its record, or nil.
func (t *told) move(ply uint32) *toldMove {
	if ply == 0 || int(ply) > len(t.moves) || t.moves[ply-1].rec == nil {
		return nil
	}
	return &t.moves[ply-1]
}

// commitAt is the commit an answer named for version, if any did.
func (t *told) commitAt(version uint64) (string, bool) {
	i, found := slices.BinarySearchFunc(t.states, version, func(s toldState, v uint64) int { return cmp.Compare(s.version, v) })
	if !found {
		return "", false
	}
	return t.states[i].commit, true
}

// at is the latest state an answer gave at version or before it: events
// other than moves leave the position as it was.
func (t *told) at(version uint64) *toldState {
	i, found := slices.BinarySearchFunc(t.states, version, func(s toldState, v uint64) int { return cmp.Compare(s.version, v) })
	if found {
		// The last of equal versions (an answer that swallowed a move
		// repeats the game's version).
		for i+1 < len(t.states) && t.states[i+1].version == version {
			i++
		}
		return &t.states[i]
	}
	if i == 0 {
		return nil
	}
	return &t.states[i-1]
}

// sameRead reports whether a move's record in a read (a snapshot, the
// final state) is the one its answer gave. Clocks aside: a read gives
// them for the last move only, as they stand now.
func sameRead(read, answer *gamev1.MoveRecord) bool {
	if proto.Equal(read, answer) {
		return true
	}
	if read.GetClocks() == nil && answer.GetClocks() == nil {
		return false
	}
	a, b := proto.CloneOf(read), proto.CloneOf(answer)
	a.Clocks, b.Clocks = nil, nil
	return proto.Equal(a, b)
}

// checkTold holds each stream, and the final state when it was read
// (final nil when not), to what the answers said: each move event's
// record (exactly) and commit, the commit of each event at a version an
// answer named, each snapshot's moves, commit and position up to its
// version, the final state's records, and the commit of the last message
// of a stream that ended whole. A move streamed or stored other than the
// one played is lost, counted by check, and not compared here.
func (l *gamesLoad) checkTold(id string, t *told, final *gamev1.Game, streams []streamed) {
	for _, st := range streams {
		var last *seen
		for i := range st.events {
			e := &st.events[i]
			switch {
			case e.snapshot:
				l.checkSnapshot(id, t, e, st.events[i+1:])
			case e.inSnapshot:
				continue
			case e.rec != nil:
				m := t.move(e.ply)
				if m == nil || m.rec.GetMove().GetCoordinate() != e.move {
					break
				}
				if !proto.Equal(e.rec, m.rec) {
					l.fail("a stream of %s sent ply %d as %v, where its answer recorded %v", id, e.ply, e.rec, m.rec)
				}
				if e.commit != m.commit {
					l.fail("a stream of %s sent ply %d with commit %q, where its answer named %q", id, e.ply, e.commit, m.commit)
				}
			default:
				if c, ok := t.commitAt(e.version); ok && c != e.commit {
					l.fail("a stream of %s sent version %d with commit %q, where an answer named %q", id, e.version, e.commit, c)
				}
			}
			last = e
		}
		if st.complete && final != nil && last != nil && last.version == final.GetVersion() && last.commit != final.GetCommit() {
			l.fail("a stream of %s ended at version %d with commit %q, where the final state has %q", id, last.version, last.commit, final.GetCommit())
		}
	}
	for _, mr := range final.GetMoves() {
		if m := t.move(mr.GetPly()); m != nil && m.rec.GetMove().GetCoordinate() == mr.GetMove().GetCoordinate() && !sameRead(mr, m.rec) {
			l.fail("the final state of %s has ply %d as %v, where its answer recorded %v", id, mr.GetPly(), mr, m.rec)
		}
	}
}

// checkSnapshot holds a snapshot, whose moves begin moves, to the answers
// up to its version: every move acknowledged by then in it (one missing is
// lost to the app, which replaces what it had with the snapshot), each as
// recorded, its commit and its position those the answers gave.
func (l *gamesLoad) checkSnapshot(id string, t *told, snap *seen, moves []seen) {
	if c, ok := t.commitAt(snap.version); ok && c != snap.commit {
		l.fail("a snapshot of %s at version %d has commit %q, where an answer named %q", id, snap.version, snap.commit, c)
	}
	n := 0
	for n < len(moves) && moves[n].inSnapshot {
		n++
	}
	moves = moves[:n]
	has := make(map[uint32]bool, n)
	for i := range moves {
		mr := &moves[i]
		has[mr.ply] = true
		if m := t.move(mr.ply); m != nil && m.rec.GetMove().GetCoordinate() == mr.move && !sameRead(mr.rec, m.rec) {
			l.fail("a snapshot of %s has ply %d as %v, where its answer recorded %v", id, mr.ply, mr.rec, m.rec)
		}
	}
	for i, m := range t.moves {
		if m.rec != nil && m.version <= snap.version && !has[uint32(i+1)] {
			l.lost.Add(1)
		}
	}
	if s := t.at(snap.version); s != nil && s.plies == n && s.position != nil && !proto.Equal(s.position, snap.position) {
		l.fail("a snapshot of %s at version %d has position %q, where the answer at version %d gave %q", id, snap.version, snap.position.GetFen(), s.version, s.position.GetFen())
	}
}
