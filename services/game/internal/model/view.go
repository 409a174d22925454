package model

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/pkg/rulespb"
)

var statusPB = map[Status]commonv1.GameStatus{
	StatusSetup:   commonv1.GameStatus_GAME_STATUS_SETUP,
	StatusOngoing: commonv1.GameStatus_GAME_STATUS_ONGOING,
	StatusEnded:   commonv1.GameStatus_GAME_STATUS_ENDED,
	StatusAborted: commonv1.GameStatus_GAME_STATUS_ABORTED,
}

// View is the full state of a game as clients see it at now. g is the
// replayed game when the caller has it (nil: replayed here).
func View(st *State, g *rules.Game, now time.Time) *gamev1.Game {
	out := Summary(st, g, now)
	for i := range st.Moves {
		out.Moves = append(out.Moves, moveRecordPB(st, i))
	}
	return out
}

// Summary is View without the list of moves: the answer to a command,
// whose size must not grow with the game (it is also kept for retries).
func Summary(st *State, g *rules.Game, now time.Time) *gamev1.Game {
	return summary(st, g, now, true)
}

// Overview is Summary without the legal moves, for a list of games.
func Overview(st *State, now time.Time) *gamev1.Game { return summary(st, nil, now, false) }

func summary(st *State, g *rules.Game, now time.Time, legal bool) *gamev1.Game {
	st = heldExcused(st, now)
	out := &gamev1.Game{
		GameId:          st.ID,
		Version:         st.Version,
		Commit:          st.LogStamp,
		Kind:            rulespb.Kind(st.Variant),
		Status:          statusPB[st.Status],
		Public:          st.Public,
		Rated:           st.Rated,
		PlayersMayAbort: st.PlayersMayAbort,
		Turn:            rulespb.Side(st.Turn()),
		FirstFormation:  rulespb.FormationPB(st.Formations[rules.First]),
		SecondFormation: rulespb.FormationPB(st.Formations[rules.Second]),
		CreatedAt:       timestamppb.New(time.UnixMilli(st.CreatedMs)),
		Clocks:          clockPBAt(st, now),
		Result:          resultPB(st),
	}
	if st.Status == StatusSetup {
		out.SetupDeadline = instantPB(setupDeadline(st))
	}
	for i, s := range st.Seats {
		out.Seats = append(out.Seats, &gamev1.Seat{Side: rulespb.Side(rules.Side(i)), PlayerId: s.PlayerID, DisplayName: s.Name, AiLevel: uint32(s.AILevel)})
		if st.Connections[i] > 0 && !st.Status.Finished() {
			out.Connected = append(out.Connected, rulespb.Side(rules.Side(i)))
		}
	}
	if st.Clock != nil {
		out.TimeControl = TimeControlPB(st.Clock.Control)
	}
	if st.DrawOffer != nil {
		out.DrawOfferedBy = rulespb.Side(*st.DrawOffer)
	}
	if st.Result != nil && st.Result.Side != nil {
		out.EndedBy = rulespb.Side(*st.Result.Side)
	}
	if st.EndedMs != 0 {
		out.EndedAt = timestamppb.New(time.UnixMilli(st.EndedMs))
	}
	if st.StartFEN == "" {
		if st.Variant == rules.Janggi {
			// Before both formations are chosen every start has the
			// same pieces, so the same points: a game resigned in its
			// setup shows them, as its result does.
			p := points(st)
			out.Points = &commonv1.Points{First: p[0], Second: p[1]}
		}
		return out
	}
	out.Start = &commonv1.Position{Fen: st.StartFEN}
	if g == nil && st.replayed != nil && st.replayed.Plies() == len(st.Moves) {
		g = st.replayed
	}
	if g == nil {
		var err error
		if g, err = st.Game(); err != nil {
			return out
		}
	}
	pos := g.Position()
	out.Position = &commonv1.Position{Fen: pos.FEN()}
	out.Check = pos.InCheck()
	if st.Variant == rules.Janggi {
		p := g.Outcome().Points
		out.Points = &commonv1.Points{First: p[0], Second: p[1]}
	}
	if legal && st.Status == StatusOngoing {
		out.LegalMoves = legalMovesPB(g.LegalMoves())
	}
	return out
}

// legalMovesPB sorts moves by text. It runs on every move's answer, so it
// allocates only the slice: the messages are shared (moveMessages).
func legalMovesPB(ms []rules.Move) []*commonv1.Move {
	t := moveMessages()
	idx := make([]int, len(ms))
	for i, m := range ms {
		idx[i] = moveIndex(m)
	}
	slices.SortFunc(idx, func(a, b int) int { return t.rank[a] - t.rank[b] })
	out := make([]*commonv1.Move, len(idx))
	for i, k := range idx {
		out[i] = t.msg[k]
	}
	return out
}

// moveTable holds one message for every coordinate move (from, to), with
// its rank in text order. Its messages are never changed, and protobuf
// allows marshalling one message from many goroutines at once, so every
// answer can point at the same ones.
type moveTable struct {
	msg  []*commonv1.Move
	rank []int
}

func moveIndex(m rules.Move) int { return int(m.From())*rules.NumSquares + int(m.To()) }

var moveMessages = sync.OnceValue(func() moveTable {
	n := rules.NumSquares * rules.NumSquares
	t := moveTable{msg: make([]*commonv1.Move, n), rank: make([]int, n)}
	order := make([]int, n)
	for from := range rules.NumSquares {
		for to := range rules.NumSquares {
			k := from*rules.NumSquares + to
			t.msg[k] = &commonv1.Move{Coordinate: rules.NewMove(rules.Square(from), rules.Square(to)).String()}
			order[k] = k
		}
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(t.msg[a].Coordinate, t.msg[b].Coordinate) })
	for r, k := range order {
		t.rank[k] = r
	}
	return t
})

// Remembered answers are kept for the game's life and its retention, one
// per command, and the legal moves were most of each one. They are kept
// without them: legal moves follow from the position alone (docs/rules.md,
// "Move generation versus adjudication"), so a retry computes them again
// and gets the first answer exactly.

// StripLegalMoves empties g's legal moves and returns a function that puts
// them back.
func StripLegalMoves(g *gamev1.Game) (restore func()) {
	if g == nil {
		return func() {}
	}
	legal := g.LegalMoves
	g.LegalMoves = nil
	return func() { g.LegalMoves = legal }
}

// RestoreLegalMoves fills in the legal moves of an ongoing game kept
// without them.
func RestoreLegalMoves(g *gamev1.Game) error {
	if g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING || g.GetPosition() == nil || len(g.GetLegalMoves()) > 0 {
		return nil
	}
	v, err := rulespb.Variant(g.GetKind())
	if err != nil {
		return err
	}
	pos, err := rules.ParseFEN(v, g.GetPosition().GetFen())
	if err != nil {
		return fmt.Errorf("position of game %s: %w", g.GetGameId(), err)
	}
	g.LegalMoves = legalMovesPB(pos.LegalMoves(nil))
	return nil
}

func moveRecordPB(st *State, i int) *gamev1.MoveRecord {
	m := st.Moves[i]
	side := st.FirstTurn
	if i%2 == 1 {
		side = side.Opponent()
	}
	r := &gamev1.MoveRecord{
		Ply: uint32(i + 1), Side: rulespb.Side(side), Move: &commonv1.Move{Coordinate: m.Move},
		Notation: m.Notation, Check: m.Check, Pass: m.Pass, Captured: m.Captured,
		PlayedAt: timestamppb.New(time.UnixMilli(m.AtMs)),
	}
	if m.Clock != nil {
		// Only the last move's turn is still running: an older record
		// would show the current turn's deadline as its own.
		var running *clock.State
		latest := i == len(st.Moves)-1
		if latest {
			running = st.Clock
		}
		r.Clocks = snapshotPB(running, *m.Clock)
		if latest {
			r.Clocks.FirstMoveDeadline = instantPB(firstMoveDeadline(st))
		}
	}
	return r
}

func resultPB(st *State) *commonv1.Result {
	if st.Result == nil {
		return nil
	}
	r := &commonv1.Result{
		Winner: commonv1.Winner(st.Result.Winner),
		Method: commonv1.EndMethod(st.Result.Method),
	}
	if st.Variant == rules.Janggi && st.Result.Method != MethodAborted {
		r.Points = &commonv1.Points{First: st.Result.Points[0], Second: st.Result.Points[1]}
	}
	return r
}

func clockPBAt(st *State, at time.Time) *commonv1.ClockSnapshot {
	if st.Clock == nil {
		return nil
	}
	if st.EndedMs != 0 && st.Clock.Phase != clock.Running {
		// An ended game's clocks stopped at its end: they are as of then,
		// whenever it is read.
		at = time.UnixMilli(st.EndedMs)
	}
	out := snapshotPB(st.Clock, st.Clock.Snapshot(at))
	out.FirstMoveDeadline = instantPB(firstMoveDeadline(st))
	return out
}

// instantPB is the instant ms, or nil for 0 (none).
func instantPB(ms int64) *timestamppb.Timestamp {
	if ms == 0 {
		return nil
	}
	return timestamppb.New(time.UnixMilli(ms))
}

func snapshotPB(c *clock.State, s clock.Snapshot) *commonv1.ClockSnapshot {
	out := &commonv1.ClockSnapshot{
		First:  playerPB(s.Players[0]),
		Second: playerPB(s.Players[1]),
		AsOf:   timestamppb.New(s.At),
	}
	if s.Phase == clock.Running {
		out.Running = rulespb.Side(rules.Side(s.Turn))
		if c == nil {
			return out
		}
		if d, ok := c.Deadline(); ok && c.Phase == clock.Running && c.Turn == s.Turn {
			out.Deadline = timestamppb.New(d)
		}
	}
	return out
}

func playerPB(p clock.PlayerClock) *commonv1.PlayerClock {
	return &commonv1.PlayerClock{
		MainLeft:    durationpb.New(p.Main()),
		PeriodsLeft: uint32(max(0, p.Periods)),
		PeriodLeft:  durationpb.New(p.Period()),
		InByoYomi:   p.InByoYomi,
	}
}

// TimeControlPB is a clock control in its proto form.
func TimeControlPB(c clock.Control) *commonv1.TimeControl {
	switch c.Kind {
	case clock.ByoYomi:
		return &commonv1.TimeControl{Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{
			MainTime: durationpb.New(c.MainTime), Periods: uint32(c.Periods), PeriodTime: durationpb.New(c.PeriodTime),
		}}}
	case clock.Fischer:
		return &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{
			MainTime: durationpb.New(c.MainTime), Increment: durationpb.New(c.Increment),
		}}}
	}
	return nil
}

// ControlFromPB reads a proto time control; nil means no clock.
func ControlFromPB(tc *commonv1.TimeControl) *clock.Control {
	switch c := tc.GetControl().(type) {
	case *commonv1.TimeControl_ByoYomi:
		return &clock.Control{Kind: clock.ByoYomi, MainTime: c.ByoYomi.GetMainTime().AsDuration(), Periods: int(c.ByoYomi.GetPeriods()), PeriodTime: c.ByoYomi.GetPeriodTime().AsDuration()}
	case *commonv1.TimeControl_Fischer:
		return &clock.Control{Kind: clock.Fischer, MainTime: c.Fischer.GetMainTime().AsDuration(), Increment: c.Fischer.GetIncrement().AsDuration()}
	}
	return nil
}

// heldExcused is st as whoever judges it next will: the turn (or wait)
// that a held commit began (State.Held) excused its hold. Until someone
// commits that excuse, every read shows it already, so that the clocks a
// client reads are the ones the sweeper and the next command go by, not
// short by the hold.
func heldExcused(st *State, now time.Time) *State {
	if st.Held.Ms == 0 {
		return st
	}
	if start, _, ok := Waiting(st); !ok || start != st.Held.TurnStartMs {
		return st
	}
	if ch, ok := Excuse(st, time.Duration(st.Held.Ms)*time.Millisecond, now); ok {
		return ch.State
	}
	return st
}
