package model

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/pkg/rulespb"
)

// Change is what a command decided: the next state and the events to
// append, committed together. Reply, when set, is the error the caller
// gets AFTER the change is committed (a move that arrived too late is
// refused, and the game ends on time in the same commit).
type Change struct {
	State  *State
	Events []*gamev1.Event
	Reply  error
	// Presence marks a change of who is connected, which is nobody's
	// play: it does not keep an abandoned game alive (see store.Commit).
	Presence bool
}

// CreateParams describe a new game.
type CreateParams struct {
	ID      string
	Variant rules.Variant
	Seats   [2]Seat
	// Control nil or of kind None: no clock.
	Control *clock.Control
	Lag     clock.LagPolicy
	// Start is a custom start position, as StartFrom read it; nil for the
	// standard one.
	Start         *rules.Game
	Public, Rated bool
	// PlayersMayAbort: see State.
	PlayersMayAbort bool
	SetupTime       time.Duration
	FirstMoveTime   time.Duration
}

// Create builds a new game.
func Create(p CreateParams, now time.Time) (Change, error) {
	st := &State{
		ID: p.ID, Variant: p.Variant, Seats: p.Seats, Public: p.Public, Rated: p.Rated, PlayersMayAbort: p.PlayersMayAbort,
		SetupTimeMs: p.SetupTime.Milliseconds(), FirstMoveTimeMs: p.FirstMoveTime.Milliseconds(),
		CreatedMs: ms(now), Moves: []MoveRec{},
	}
	for i, s := range p.Seats {
		if s.AILevel < 0 || s.AILevel > 10 {
			return Change{}, apierr.New(apierr.Invalid, "seats[%d].ai_level: %d is out of range 0..10", i, s.AILevel)
		}
	}
	if p.Control != nil && p.Control.Kind != clock.None {
		if err := p.Control.Validate(); err != nil {
			return Change{}, apierr.New(apierr.Invalid, "time_control: %v", err)
		}
		c := clock.New(*p.Control).WithLag(p.Lag)
		st.Clock = &c
	}
	ch := Change{State: st}
	switch {
	case p.Start != nil:
		g := p.Start
		st.StartFEN, st.CustomStart, st.FirstTurn = g.Start(), true, g.Position().Turn()
		st.replayed = g
		st.Status = StatusOngoing
	case p.Variant == rules.Xiangqi:
		st.StartFEN, st.FirstTurn, st.Status = rules.StartFEN(rules.Xiangqi), rules.First, StatusOngoing
	default:
		st.Status = StatusSetup
		st.SetupDeadlineMs = ms(now) + st.SetupTimeMs
	}
	ch.Events = append(ch.Events, &gamev1.Event{Kind: &gamev1.Event_GameCreated{GameCreated: &gamev1.GameCreated{}}})
	if st.Status == StatusOngoing {
		ch.Events = append(ch.Events, start(st, now))
	}
	st.WakeMs = wake(st, now)
	return ch, nil
}

// StartFrom is the game a custom start position begins, refused when the
// FEN does not parse, a piece stands where no game can bring it
// (rules.Position.Reachable), or the game would be over before its first
// move.
func StartFrom(v rules.Variant, fen string) (*rules.Game, error) {
	g, err := rules.NewGame(v, fen)
	if err == nil {
		err = g.Position().Reachable()
	}
	if err != nil {
		return nil, apierr.New(apierr.Invalid, "start: %v", err)
	}
	if g.Outcome().Ended {
		return nil, apierr.New(apierr.Invalid, "start: the game would be over before it starts (%s)", strings.ReplaceAll(g.Outcome().Method.String(), "_", " "))
	}
	return g, nil
}

func start(st *State, now time.Time) *gamev1.Event {
	st.TurnStartMs = ms(now)
	st.WaitExcusedMs = 0
	return &gamev1.Event{Kind: &gamev1.Event_GameStarted{GameStarted: &gamev1.GameStarted{
		Start:  &commonv1.Position{Fen: st.StartFEN},
		Clocks: clockPBAt(st, now),
	}}}
}

// firstMoveDeadline is the last instant the side to move may make its
// first move in a clocked game, or 0 when the rule does not apply. Clocks
// start only after both first moves, so an absent player aborts the game
// instead of losing it. Once the clock runs, the rule is over for good:
// an undo back before the first moves (games against the AI) keeps the
// clock running.
func firstMoveDeadline(st *State) int64 {
	if st.Status != StatusOngoing || st.Clock == nil || st.Clock.Phase != clock.Idle || st.FirstMoveTimeMs <= 0 || len(st.Moves) >= 2 {
		return 0
	}
	return st.TurnStartMs + st.FirstMoveTimeMs + st.WaitExcusedMs
}

// setupDeadline is the last instant the side choosing a formation may
// choose it, or 0 outside setup.
func setupDeadline(st *State) int64 {
	if st.Status != StatusSetup || st.SetupDeadlineMs == 0 {
		return 0
	}
	return st.SetupDeadlineMs + st.WaitExcusedMs
}

// Waiting is what runs against the side to move (or to choose) now, and
// could be excused an outage: the choice of a formation, the wait for a
// first move, or a clock's running turn. It began at startMs, and
// excusedMs of it is excused already; ok is false when nothing runs.
func Waiting(st *State) (startMs, excusedMs int64, ok bool) {
	switch {
	case setupDeadline(st) != 0:
		return st.SetupDeadlineMs - st.SetupTimeMs, st.WaitExcusedMs, true
	case firstMoveDeadline(st) != 0:
		return st.TurnStartMs, st.WaitExcusedMs, true
	case st.Status == StatusOngoing && st.Clock != nil && st.Clock.Phase == clock.Running:
		return st.Clock.TurnStartMs, st.Clock.ExcusedMs, true
	}
	return 0, 0, false
}

// Due is the last instant of what runs against the side to move (see
// Waiting) with what is excused of it already: the formation's or the
// first move's deadline, or the running clock's (grace included). ok is
// false when nothing runs or the clock has no deadline.
func Due(st *State) (ms int64, ok bool) {
	switch {
	case setupDeadline(st) != 0:
		return setupDeadline(st), true
	case firstMoveDeadline(st) != 0:
		return firstMoveDeadline(st), true
	case st.Status == StatusOngoing && st.Clock != nil && st.Clock.Phase == clock.Running:
		d, ok := st.Clock.Deadline()
		return d.UnixMilli(), ok
	}
	return 0, false
}

// wake is the next instant the game must be looked at without a request.
// For a running clock that is its next milestone after now and after
// ClockEventsMs: after an excuse that mark can lie past now (another
// process announced a milestone the excuse moved later), and a wake-up on a
// milestone announced already would find nothing to announce when due.
// Milestones passed before now are to be announced first (clockMilestones),
// or the wake-up skips them.
func wake(st *State, now time.Time) int64 {
	switch st.Status {
	case StatusSetup:
		return setupDeadline(st) + 1
	case StatusOngoing:
		if d := firstMoveDeadline(st); d != 0 {
			return d + 1
		}
		if st.Clock != nil {
			from := now
			if st.Clock.Phase == clock.Running && st.ClockEventsMs > ms(now) {
				from = time.UnixMilli(st.ClockEventsMs)
			}
			if t, _, ok := st.Clock.NextMilestone(from); ok {
				return ms(t)
			}
			if d, ok := st.Clock.Deadline(); ok {
				// Flagged already: due at once, not never.
				return ms(d) + 1
			}
		}
	}
	return 0
}

func clone(st *State) *State {
	c := *st
	// The moves are shared, not copied (see appendMove): copying them
	// made every move cost the game's length.
	if st.Clock != nil {
		k := *st.Clock
		c.Clock = &k
	}
	if st.Result != nil {
		r := *st.Result
		c.Result = &r
	}
	return &c
}

// appendMove adds rec to n's moves in O(1) when it can. States share one
// array of moves; n may write the slot past its last move only if no
// other state has claimed that slot, which the shared end mark decides
// atomically. Otherwise (a sibling state got there first, or n was cut
// back by an undo) the moves are copied into an array of n's own.
func appendMove(n *State, rec MoveRec) {
	k := len(n.Moves)
	if n.movesEnd != nil && k < cap(n.Moves) && n.movesEnd.CompareAndSwap(int64(k), int64(k+1)) {
		n.Moves = append(n.Moves, rec)
		return
	}
	moves := make([]MoveRec, k, max(2*k, 64))
	copy(moves, n.Moves)
	n.Moves = append(moves, rec)
	n.movesEnd = new(atomic.Int64)
	n.movesEnd.Store(int64(k + 1))
}

func checkOpen(st *State, action string) error {
	switch st.Status {
	case StatusEnded:
		return apierr.New(apierr.Precondition, "cannot %s: the game has ended", action)
	case StatusAborted:
		return apierr.New(apierr.Precondition, "cannot %s: the game was aborted", action)
	}
	return nil
}

func checkPlaying(st *State, side rules.Side, action string) error {
	if err := checkOpen(st, action); err != nil {
		return err
	}
	if st.Status == StatusSetup {
		return apierr.New(apierr.Precondition, "cannot %s: formations are still being chosen", action)
	}
	if t := st.Turn(); t != side {
		return apierr.New(apierr.Precondition, "cannot %s: it is %s's turn", action, rules.SideName(st.Variant, t))
	}
	return nil
}

// flagFirst ends the game when a deadline of its clock passed before now
// (the first-move deadline aborts it, a flag ends it on time), and refuses
// the command of side: the deadline came first, so the game had ended.
// Moves find these in playOn; every other command of a running game checks
// here, so that a draw, a resignation or an undo cannot come after a
// deadline the sweeper has not seen yet, nor leave the game with no
// wake-up. The side whose clock runs gets no lag grace for a command that
// is no move (accepting a draw in it would turn a loss on time into a
// draw); its opponent's commands leave it the grace, for its move may be
// on its way.
func flagFirst(st *State, side rules.Side, action string, now time.Time) (Change, bool) {
	if ch, ok := lateSetup(st, action, now); ok {
		return ch, true
	}
	if ch, ok := lateFirstMove(st, action, now); ok {
		return ch, true
	}
	if st.Status != StatusOngoing || st.Clock == nil {
		return Change{}, false
	}
	if out := st.Clock.Flag(now) || rules.Side(st.Clock.Turn) == side && st.Clock.OutOfBudget(now); !out {
		return Change{}, false
	}
	n := clone(st)
	loser := rules.Side(n.Clock.Turn)
	evs := clockMilestones(n, now)
	// The clock stops at its flag; within the grace, stopping it would
	// show it at zero, not flagged.
	if c, err := n.Clock.Yield(now); errors.As(err, new(*clock.FlagError)) {
		n.Clock = &c
	}
	evs = append(evs, endOnTime(n, loser, now))
	return Change{State: n, Events: evs, Reply: apierr.New(apierr.Precondition,
		"cannot %s: %s's time had run out, and the game ended on time", action, rules.SideName(n.Variant, loser))}, true
}

// lateSetup sets the default formation that was due when the side
// choosing let its setup time pass before now, as the sweeper would have,
// and refuses the command: the deadline came first. Each deadline the
// sweeper missed is thus met by the next command, one at a time.
func lateSetup(st *State, action string, now time.Time) (Change, bool) {
	if d := setupDeadline(st); d == 0 || ms(now) <= d {
		return Change{}, false
	}
	n := clone(st)
	side := n.Turn()
	return Change{State: n, Events: setFormation(n, side, rules.MaSangSangMa, true, now), Reply: apierr.New(apierr.Precondition,
		"cannot %s: %s's time to choose a formation ran out, and the default (ma-sang-sang-ma) was set", action, rules.SideName(n.Variant, side))}, true
}

// lateFirstMove aborts the game when the side to move let its first-move
// deadline pass before now, and refuses the command.
func lateFirstMove(st *State, action string, now time.Time) (Change, bool) {
	if d := firstMoveDeadline(st); d == 0 || ms(now) <= d {
		return Change{}, false
	}
	n := clone(st)
	return Change{State: n, Events: []*gamev1.Event{abort(n, n.Turn(), now)}, Reply: apierr.New(apierr.Precondition,
		"cannot %s: the game was aborted, with no first move within %v", action, time.Duration(n.FirstMoveTimeMs)*time.Millisecond)}, true
}

// ChooseFormation sets side's Janggi formation (Han first, then Cho).
func ChooseFormation(st *State, side rules.Side, f rules.Formation, now time.Time) (Change, error) {
	if st.Variant != rules.Janggi {
		return Change{}, apierr.New(apierr.Precondition, "formations are a Janggi rule; this game is Xiangqi")
	}
	if err := checkOpen(st, "choose a formation"); err != nil {
		return Change{}, err
	}
	if st.Status != StatusSetup {
		return Change{}, apierr.New(apierr.Precondition, "cannot choose a formation: the game has started")
	}
	// A late choice by either side meets the deadline that ran out, as any
	// other command would: the side choosing would be told wrong.
	if ch, ok := lateSetup(st, "choose a formation", now); ok {
		return ch, nil
	}
	if t := st.Turn(); t != side {
		if st.Formations[side] != 0 {
			// Han's choice racing the default that its setup time's end
			// applied, or a retry after it: not a question of turns.
			return Change{}, apierr.New(apierr.Precondition, "cannot choose a formation: %s's is set already (its choice, or the default once its setup time ran out: see the game's events); %s chooses now", rules.SideName(st.Variant, side), rules.SideName(st.Variant, t))
		}
		return Change{}, apierr.New(apierr.Precondition, "cannot choose a formation: %s chooses now (Han first, then Cho)", rules.SideName(st.Variant, t))
	}
	n := clone(st)
	return Change{State: n, Events: setFormation(n, side, f, false, now)}, nil
}

func setFormation(st *State, side rules.Side, f rules.Formation, byDefault bool, now time.Time) []*gamev1.Event {
	st.Formations[side] = f
	chosen := &gamev1.FormationChosen{Side: rulespb.Side(side), Formation: rulespb.FormationPB(f), ByDefault: byDefault}
	evs := []*gamev1.Event{{Kind: &gamev1.Event_FormationChosen{FormationChosen: chosen}}}
	if side == rules.Second {
		st.SetupDeadlineMs = ms(now) + st.SetupTimeMs
		st.WaitExcusedMs = 0
		chosen.SetupDeadline = instantPB(st.SetupDeadlineMs)
	} else {
		st.SetupDeadlineMs = 0
		st.StartFEN = rules.JanggiStartFEN(st.Formations[rules.First], st.Formations[rules.Second])
		st.FirstTurn = rules.First
		st.Status = StatusOngoing
		evs = append(evs, start(st, now))
	}
	st.WakeMs = wake(st, now)
	return evs
}

// Move plays a move (or a pass written as the general's square twice).
func Move(st *State, side rules.Side, text string, lag time.Duration, now time.Time) (Change, error) {
	if ch, ok := deadlinesBeforePlay(st, side, "move", now); ok {
		return ch, nil
	}
	if err := checkPlaying(st, side, "move"); err != nil {
		return Change{}, err
	}
	mv, err := rules.ParseMove(strings.TrimSpace(text))
	if err != nil {
		return Change{}, apierr.New(apierr.Invalid, "move %q: %v", text, err)
	}
	return play(st, side, mv, lag, now)
}

// Pass passes the turn (Janggi, not in check).
func Pass(st *State, side rules.Side, lag time.Duration, now time.Time) (Change, error) {
	if st.Variant != rules.Janggi {
		return Change{}, apierr.New(apierr.Precondition, "passing is a Janggi rule; Xiangqi has no pass")
	}
	if ch, ok := deadlinesBeforePlay(st, side, "pass", now); ok {
		return ch, nil
	}
	if err := checkPlaying(st, side, "pass"); err != nil {
		return Change{}, err
	}
	g, err := st.Game()
	if err != nil {
		return Change{}, fmt.Errorf("replay game %s: %w", st.ID, err)
	}
	sq := g.Position().GeneralSquare(side)
	return playOn(st, g, side, rules.NewMove(sq, sq), lag, now)
}

// deadlinesBeforePlay meets the deadlines passed before a move or pass of
// side. The side to move meets its first-move deadline and its flag in
// playOn, where its lag credit counts; a move of the other side, out of
// turn, meets them here as every other command does (flagFirst), so that
// its refusal gives the true reason, the game ended, not whose turn it is.
func deadlinesBeforePlay(st *State, side rules.Side, action string, now time.Time) (Change, bool) {
	if st.Status == StatusOngoing && st.Turn() != side {
		return flagFirst(st, side, action, now)
	}
	return lateSetup(st, action, now)
}

func play(st *State, side rules.Side, mv rules.Move, lag time.Duration, now time.Time) (Change, error) {
	g, err := st.Game()
	if err != nil {
		return Change{}, fmt.Errorf("replay game %s: %w", st.ID, err)
	}
	return playOn(st, g, side, mv, lag, now)
}

func playOn(st *State, g *rules.Game, side rules.Side, mv rules.Move, lag time.Duration, now time.Time) (Change, error) {
	// A late first move or a flag is decided by the server's time before
	// the move is even looked at: the same instants the sweeper uses. A
	// move that came too late is refused for that, legal or not.
	action := "move"
	if mv.IsPass() {
		action = "pass"
	}
	if ch, ok := lateFirstMove(st, action, now); ok {
		return ch, nil
	}
	n := clone(st)
	// A move counts as made as early as its lag credit says: a milestone
	// the credit lands before is not passed, and announcing it would have
	// the move's own clocks take it back.
	movedAt := now
	if n.Clock != nil {
		movedAt = now.Add(-n.Clock.Credit(now, lag))
	}
	evs := clockMilestones(n, movedAt)
	var earned clock.Earned
	if n.Clock != nil && n.Clock.Phase == clock.Running {
		next, e, err := n.Clock.MoveEarning(now, lag)
		if err != nil {
			if errors.Is(err, clock.ErrFlagged) {
				// The clock as Move left it: stopped at the flag.
				n.Clock = &next
				evs = append(evs, endOnTime(n, side, now))
				return Change{State: n, Events: evs, Reply: apierr.New(apierr.Precondition, "the %s came after %s's time ran out; the game ended on time", action, rules.SideName(n.Variant, side))}, nil
			}
			return Change{}, fmt.Errorf("clock of game %s: %w", n.ID, err)
		}
		n.Clock, earned = &next, e
		// The opponent's turn starts with nothing of it announced. The
		// mark may lie past now (see Excuse), and kept there it would
		// hide the new turn's milestones before it.
		n.ClockEventsMs = ms(now)
	}
	if mv.IsPass() && st.Variant == rules.Janggi && g.Position().InCheck() {
		if g.Position().GeneralSquare(side) == mv.From() {
			return Change{}, apierr.New(apierr.Precondition, "cannot pass: %s is in check", rules.SideName(st.Variant, side))
		}
	}
	info, err := g.Play(mv)
	if err != nil {
		if errors.Is(err, rules.ErrIllegalMove) {
			return Change{}, apierr.New(apierr.Invalid, "%s", stripPly(err.Error()))
		}
		return Change{}, apierr.Wrap(apierr.Precondition, err)
	}
	if n.DrawOffer != nil && *n.DrawOffer != side {
		evs = append(evs, &gamev1.Event{Kind: &gamev1.Event_DrawDeclined{DrawDeclined: &gamev1.DrawDeclined{Side: rulespb.Side(side)}}})
		// Declined by a move as by an answer: the offerer offers again
		// only once it has moved.
		n.DrawBarred[*n.DrawOffer] = true
		n.DrawOffer = nil
	}
	n.DrawBarred[side] = false
	rec := MoveRec{
		Move: mv.String(), Notation: info.Notation, Check: info.Check, Pass: info.Pass,
		Captured: rulespb.CapturedLetter(info.Captured), AtMs: ms(now),
		IncMs: earned.MainMs, RefillMs: earned.PeriodMs, LagMs: earned.LagMs,
	}
	appendMove(n, rec)
	n.TurnStartMs = ms(now)
	n.WaitExcusedMs = 0
	if len(n.Moves) >= 2 {
		n.Begun = true
	}
	if n.Clock != nil && n.Clock.Phase == clock.Idle && len(n.Moves) == 2 {
		started, err := n.Clock.Start(now, clock.Side(n.Turn()))
		if err != nil {
			return Change{}, fmt.Errorf("start clock of game %s: %w", n.ID, err)
		}
		n.Clock = &started
		n.ClockEventsMs = ms(now)
	}
	// A move that ends the game starts no turn: its clocks are the stopped
	// ones, in its event and in reads alike.
	var ended *gamev1.Event
	if o := g.Outcome(); o.Ended {
		ended = finish(n, Result{Winner: o.Winner, Method: o.Method, Points: o.Points}, now)
	}
	if n.Clock != nil {
		snap := n.Clock.Snapshot(now)
		n.Moves[len(n.Moves)-1].Clock = &snap
	}
	evs = append(evs, &gamev1.Event{Kind: &gamev1.Event_MovePlayed{MovePlayed: moveRecordPB(n, len(n.Moves)-1)}})
	if ended != nil {
		evs = append(evs, ended)
	}
	n.WakeMs = wake(n, now)
	n.replayed = g
	return Change{State: n, Events: evs}, nil
}

// stripPly drops the "ply N: " prefix of a rules error: the client knows
// which move it sent.
func stripPly(s string) string {
	if strings.HasPrefix(s, "ply ") {
		if _, rest, ok := strings.Cut(s, ": "); ok {
			return rest
		}
	}
	return s
}

func finish(st *State, r Result, now time.Time) *gamev1.Event {
	if st.Clock != nil && st.Clock.Phase == clock.Running {
		stopped := st.Clock.Stop(now)
		st.Clock = &stopped
	}
	st.Status = StatusEnded
	if r.Method == MethodAborted {
		st.Status = StatusAborted
	}
	st.Result = &r
	st.EndedMs = ms(now)
	st.DrawOffer = nil
	st.WakeMs = 0
	ev := &gamev1.GameEnded{Result: resultPB(st), Clocks: clockPBAt(st, now)}
	if r.Side != nil {
		ev.Side = rulespb.Side(*r.Side)
	}
	return &gamev1.Event{Kind: &gamev1.Event_GameEnded{GameEnded: ev}}
}

func points(st *State) [2]float64 {
	if st.Variant != rules.Janggi {
		return [2]float64{}
	}
	// While formations are being chosen this is the default start: every
	// formation has the same pieces, so the same points.
	g, err := st.Game()
	if err != nil {
		return [2]float64{}
	}
	return g.Outcome().Points
}

func winnerAgainst(loser rules.Side) rules.Winner {
	if loser == rules.First {
		return rules.SecondWins
	}
	return rules.FirstWins
}

func endOnTime(st *State, loser rules.Side, now time.Time) *gamev1.Event {
	return finish(st, Result{Winner: winnerAgainst(loser), Method: rules.Timeout, Points: points(st), Side: &loser}, now)
}

// abort ends the game without a result, for want of by's first move, or
// at by's request.
func abort(st *State, by rules.Side, now time.Time) *gamev1.Event {
	return finish(st, Result{Winner: rules.NoWinner, Method: MethodAborted, Side: &by}, now)
}

// clockMilestones announces the byo-yomi milestones passed since the last
// announcement (flags excepted: those end the game elsewhere).
func clockMilestones(st *State, now time.Time) []*gamev1.Event {
	if st.Clock == nil || st.Clock.Phase != clock.Running {
		return nil
	}
	var evs []*gamev1.Event
	for _, e := range st.Clock.Events(time.UnixMilli(st.ClockEventsMs), now) {
		if ev := clockEventPB(st, e); ev != nil {
			evs = append(evs, ev)
		}
	}
	if ms(now) > st.ClockEventsMs {
		st.ClockEventsMs = ms(now)
	}
	return evs
}

// clockEventPB is the event announcing milestone e; nil for a flag, which
// ends the game instead.
func clockEventPB(st *State, e clock.Event) *gamev1.Event {
	kind := gamev1.ClockEventKind_CLOCK_EVENT_KIND_UNSPECIFIED
	switch e.Kind {
	case clock.EnteredByoYomi:
		kind = gamev1.ClockEventKind_CLOCK_EVENT_KIND_BYO_YOMI_ENTERED
	case clock.PeriodUsed:
		kind = gamev1.ClockEventKind_CLOCK_EVENT_KIND_PERIOD_USED
	default:
		return nil
	}
	return &gamev1.Event{Time: timestamppb.New(e.At), Kind: &gamev1.Event_Clock{Clock: &gamev1.ClockEvent{
		Side: rulespb.Side(rules.Side(e.Side)), Kind: kind, Clocks: clockPBAt(st, e.At),
	}}}
}

// periodsTakenBack announces the byo-yomi periods of side that an undo's
// take-back used up, and moves the mark of the milestones announced to
// match the clock it leaves (n.Clock). The periods announced are those the
// clock before it (was) showed by the mark, which an excuse may have moved
// past now; those the take-back used up were crossed earlier in the turn
// by the clock it leaves, or before the turn began (a take-back spilling
// into the next period), dated then at the turn's start. The sweeper goes
// on from the first period not announced.
func periodsTakenBack(n *State, was clock.State, side rules.Side, now time.Time) []*gamev1.Event {
	told := time.UnixMilli(max(ms(now), n.ClockEventsMs))
	had := was.Snapshot(told).Players[side].Periods
	left := n.Clock.Snapshot(now).Players[side].Periods
	crossed := make(map[int]clock.Event)
	if end, ok := n.Clock.Deadline(); ok {
		for _, e := range n.Clock.Events(time.UnixMilli(0), end) {
			if e.Kind == clock.PeriodUsed && rules.Side(e.Side) == side {
				crossed[e.PeriodsLeft] = e
			}
		}
	}
	n.ClockEventsMs = ms(now)
	if e, ok := crossed[had]; ok && e.At.After(now) {
		// Announced already, the clock it leaves crosses it later.
		n.ClockEventsMs = ms(e.At)
	}
	var evs []*gamev1.Event
	for periods := had - 1; periods >= left; periods-- {
		e, ok := crossed[periods]
		if !ok {
			e = clock.Event{Kind: clock.PeriodUsed, Side: clock.Side(side), At: time.UnixMilli(n.Clock.TurnStartMs), PeriodsLeft: periods}
		}
		evs = append(evs, clockEventPB(n, e))
	}
	return evs
}

// Excuse leaves total of what runs against the side to move (see
// Waiting) uncharged: time in which nobody could choose or move, since the
// service could not reach its storage. A running turn is excused as
// clock.State.Excuse does: its deadline and the milestones still to come
// move later by what is newly excused, and so does the mark up to which
// milestones were announced, so none is announced twice. The deadline of
// a formation's choice or of a first move moves later alike. As with the
// clock, the largest total given counts, and never more than the wait has
// lasted. ok is false when nothing runs or nothing more is excused; the
// caller commits the change ahead of the command it runs on its state.
func Excuse(st *State, total time.Duration, now time.Time) (ch Change, ok bool) {
	start, already, ok := Waiting(st)
	switch {
	case !ok:
		return Change{}, false
	case st.Status == StatusSetup || firstMoveDeadline(st) != 0:
		excused := min(total.Milliseconds(), ms(now)-start)
		if excused <= already {
			return Change{}, false
		}
		n := clone(st)
		n.WaitExcusedMs = excused
		n.WakeMs = wake(n, now)
		ev := &gamev1.Event{Kind: &gamev1.Event_Clock{Clock: &gamev1.ClockEvent{
			Side: rulespb.Side(n.Turn()), Kind: gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED,
			Clocks: clockPBAt(n, now), Excused: durationpb.New(time.Duration(excused) * time.Millisecond),
			SetupDeadline: instantPB(setupDeadline(n)),
		}}}
		return Change{State: n, Events: []*gamev1.Event{ev}}, true
	}
	c := st.Clock.Excuse(total, now)
	more := c.ExcusedMs - st.Clock.ExcusedMs
	if more <= 0 {
		return Change{}, false
	}
	n := clone(st)
	n.Clock = &c
	if n.ClockEventsMs != 0 {
		// Past now when another process excused less of the same outage
		// and a milestone was announced in between: it stays announced.
		n.ClockEventsMs += more
	}
	// The first milestone not yet announced: one the excuse left before
	// now (a late wake-up) is due at once rather than skipped, and one
	// announced already is not woken for again.
	n.WakeMs = wake(n, time.UnixMilli(n.ClockEventsMs))
	ev := &gamev1.Event{Kind: &gamev1.Event_Clock{Clock: &gamev1.ClockEvent{
		Side: rulespb.Side(rules.Side(c.Turn)), Kind: gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED,
		Clocks: clockPBAt(n, now), Excused: durationpb.New(time.Duration(c.ExcusedMs) * time.Millisecond),
	}}}
	return Change{State: n, Events: []*gamev1.Event{ev}}, true
}

// Resign ends the game as a loss for side, at any time.
func Resign(st *State, side rules.Side, now time.Time) (Change, error) {
	if err := checkOpen(st, "resign"); err != nil {
		return Change{}, err
	}
	if ch, ok := flagFirst(st, side, "resign", now); ok {
		return ch, nil
	}
	n := clone(st)
	ev := finish(n, Result{Winner: winnerAgainst(side), Method: rules.Resignation, Points: points(n), Side: &side}, now)
	return Change{State: n, Events: []*gamev1.Event{ev}}, nil
}

// Abort ends the game without a result at side's request, while it has
// not begun: during the Janggi setup, or before both sides have made
// their first move. Only a game created to allow it may be aborted so
// (PlayersMayAbort: matchmaking's, not a tournament's); after that, a
// player leaves by resigning.
func Abort(st *State, side rules.Side, now time.Time) (Change, error) {
	if err := checkOpen(st, "abort"); err != nil {
		return Change{}, err
	}
	// A deadline passed ends the game first, whoever may abort it: the
	// refusals below would send a player to resign a game already over.
	if ch, ok := flagFirst(st, side, "abort", now); ok {
		return ch, nil
	}
	if st.Seats[side].AILevel > 0 {
		return Change{}, apierr.New(apierr.Precondition, "cannot abort: the AI's seat cannot abort a game; only its human opponent can")
	}
	if !st.PlayersMayAbort {
		return Change{}, apierr.New(apierr.Precondition, "cannot abort: this game was created without aborts by its players; resign to leave it")
	}
	if begun(st) {
		return Change{}, apierr.New(apierr.Precondition, "cannot abort: the game has begun (both sides made their first move); resign to leave it")
	}
	n := clone(st)
	return Change{State: n, Events: []*gamev1.Event{abort(n, side, now)}}, nil
}

// begun reports whether a game is past its start, for good: both first
// moves were made (an undo against the AI taking them back does not make
// the game new again), or its clock started.
func begun(st *State) bool {
	if st.Status != StatusOngoing {
		return false
	}
	return st.Begun || len(st.Moves) >= 2 || st.Clock != nil && st.Clock.Phase != clock.Idle
}

// OfferDraw offers a draw (Xiangqi).
func OfferDraw(st *State, side rules.Side, now time.Time) (Change, error) {
	if err := drawsAllowed(st); err != nil {
		return Change{}, err
	}
	if err := checkOpen(st, "offer a draw"); err != nil {
		return Change{}, err
	}
	if ch, ok := flagFirst(st, side, "offer a draw", now); ok {
		return ch, nil
	}
	if st.DrawOffer != nil {
		return Change{}, apierr.New(apierr.Precondition, "cannot offer a draw: %s's offer is pending", rules.SideName(st.Variant, *st.DrawOffer))
	}
	if st.DrawBarred[side] {
		return Change{}, apierr.New(apierr.Precondition, "cannot offer a draw again before you move: your last offer was declined")
	}
	n := clone(st)
	// A milestone passed that the sweeper has not handled yet is announced
	// here, as a move does: the new wake-up would otherwise replace its
	// entry, and it would come out only with the next one.
	evs := clockMilestones(n, now)
	n.DrawOffer = &side
	n.WakeMs = wake(n, now)
	evs = append(evs, &gamev1.Event{Kind: &gamev1.Event_DrawOffered{DrawOffered: &gamev1.DrawOffered{Side: rulespb.Side(side)}}})
	return Change{State: n, Events: evs}, nil
}

// drawsAllowed refuses draws outside Xiangqi.
func drawsAllowed(st *State) error {
	if st.Variant != rules.Xiangqi {
		return apierr.New(apierr.Precondition, "draw offers are a Xiangqi rule; a Janggi game is decided by points")
	}
	return nil
}

// AnswerDraw accepts or declines the opponent's offer.
func AnswerDraw(st *State, side rules.Side, accept bool, now time.Time) (Change, error) {
	if err := drawsAllowed(st); err != nil {
		return Change{}, err
	}
	if err := checkOpen(st, "answer a draw offer"); err != nil {
		return Change{}, err
	}
	if ch, ok := flagFirst(st, side, "answer a draw offer", now); ok {
		return ch, nil
	}
	if st.DrawOffer == nil || *st.DrawOffer == side {
		return Change{}, apierr.New(apierr.Precondition, "there is no draw offer from your opponent to answer")
	}
	n := clone(st)
	if !accept {
		n.DrawBarred[*n.DrawOffer] = true
		n.DrawOffer = nil
		return Change{State: n, Events: []*gamev1.Event{{Kind: &gamev1.Event_DrawDeclined{DrawDeclined: &gamev1.DrawDeclined{Side: rulespb.Side(side)}}}}}, nil
	}
	return Change{State: n, Events: []*gamev1.Event{finish(n, Result{Winner: rules.Draw, Method: rules.Agreement}, now)}}, nil
}

// MaxUndos bounds the undos of a game. Each keeps its answer and event for
// the game's life, and takes the game back to where it was, so without a
// bound one client could grow one game without end.
const MaxUndos = 200

// Undo takes back the human's last move and the AI's reply to it (games
// against the AI only).
func Undo(st *State, side rules.Side, now time.Time) (Change, error) {
	if !st.HasAI() {
		return Change{}, apierr.New(apierr.Precondition, "undo is only allowed in games against the AI")
	}
	if st.Seats[side].AILevel > 0 {
		return Change{}, apierr.New(apierr.Precondition, "the AI's seat cannot ask for an undo; only its human opponent can")
	}
	if err := checkOpen(st, "undo"); err != nil {
		return Change{}, err
	}
	if ch, ok := flagFirst(st, side, "undo", now); ok {
		return ch, nil
	}
	if st.Status == StatusSetup {
		return Change{}, apierr.New(apierr.Precondition, "cannot undo: the game has not started")
	}
	// Ply i was played by FirstTurn when i is even (0-based).
	moverOf := func(i int) rules.Side {
		if i%2 == 0 {
			return st.FirstTurn
		}
		return st.FirstTurn.Opponent()
	}
	k := len(st.Moves)
	take := 0
	switch {
	case k >= 1 && moverOf(k-1) == side:
		take = 1
	case k >= 2 && moverOf(k-2) == side:
		take = 2
	}
	if take == 0 {
		return Change{}, apierr.New(apierr.Precondition, "nothing to undo: you have not moved yet")
	}
	if st.Undos >= MaxUndos {
		return Change{}, apierr.New(apierr.Precondition, "no more undos: a game allows %d", MaxUndos)
	}
	n := clone(st)
	// Milestones passed and not yet announced come first, as for a move:
	// of the AI's turn, before the undo ends it, or of the human's, before
	// the undo sets the next wake-up past them.
	evs := clockMilestones(n, now)
	n.Undos++
	removed := make([]*gamev1.MoveRecord, 0, take)
	for i := k - 1; i >= k-take; i-- {
		removed = append(removed, moveRecordPB(st, i))
	}
	n.Moves = n.Moves[:k-take]
	// An offer belongs to the position it was made in: the undo withdraws
	// it, and says so, for clients that follow the events.
	withdrawn := n.DrawOffer != nil
	n.DrawOffer = nil
	n.TurnStartMs = ms(now)
	n.WaitExcusedMs = 0
	n.replayed = nil
	g, err := n.Game()
	if err != nil {
		return Change{}, fmt.Errorf("replay game %s: %w", n.ID, err)
	}
	n.replayed = g
	if n.Clock != nil && n.Clock.Phase == clock.Running {
		c, err := *n.Clock, error(nil)
		if rules.Side(n.Clock.Turn) != n.Turn() {
			// The AI's turn, cut short: it ends as if the AI had moved
			// (a fresh byo-yomi period next time), and the human's starts,
			// with nothing of it announced (see playOn).
			c, err = n.Clock.Yield(now)
			n.ClockEventsMs = ms(now)
		}
		// Otherwise the human's own turn goes on, the clock untouched: a
		// turn begun again at the undo would get the lag grace again, and
		// undos within it would hold off the flag for ever.
		var flag *clock.FlagError
		switch {
		case errors.As(err, &flag):
			// Out of its time though within a move's lag grace: a turn
			// handed back has no lag to forgive. The game ends on time
			// where it stood, the moves not taken back.
			ended := clone(st)
			evs := clockMilestones(ended, now)
			ended.Clock = &c
			evs = append(evs, endOnTime(ended, rules.Side(flag.Side), now))
			return Change{State: ended, Events: evs, Reply: apierr.New(apierr.Precondition,
				"cannot undo: %s's time had run out, and the game ended on time", rules.SideName(st.Variant, rules.Side(flag.Side)))}, nil
		case err != nil:
			return Change{}, fmt.Errorf("clock of game %s: %w", n.ID, err)
		}
		// The human's move taken back keeps nothing it earned: a move and
		// its undo would otherwise add time (an increment, a period filled
		// again) as often as undos are allowed. The AI's reply keeps what
		// it earned, as a reply cut short ends with a fresh period: the
		// AI asks for no undo, and each taking its time away would let
		// undos run its clock out.
		var earned [2]clock.Earned
		for i := k - take; i < k; i++ {
			if moverOf(i) == side {
				earned[side] = st.Moves[i].earned()
			}
		}
		back, ok := c.TakeBack(now, earned)
		if !ok {
			return Change{}, apierr.New(apierr.Precondition,
				"cannot undo: without the time your move earned (its increment, or the byo-yomi period it filled again), you would be out of time")
		}
		n.Clock = &back
		if earned[side].PeriodMs > 0 {
			evs = append(evs, periodsTakenBack(n, c, side, now)...)
		}
	}
	if k := len(n.Moves); k > 0 && n.Clock != nil {
		// The last move left shows the running turn's clocks (see
		// MoveRecord.clocks): those the undo left, not those it played to.
		moves := make([]MoveRec, k, max(2*k, 64))
		copy(moves, n.Moves) // shared with the state before the undo
		snap := n.Clock.Snapshot(now)
		moves[k-1].Clock = &snap
		n.Moves, n.movesEnd = moves, nil
	}
	n.WakeMs = wake(n, now)
	evs = append(evs, &gamev1.Event{Kind: &gamev1.Event_MovesUndone{MovesUndone: &gamev1.MovesUndone{
		Moves: removed, Position: &commonv1.Position{Fen: g.Position().FEN()}, Clocks: clockPBAt(n, now), DrawOfferWithdrawn: withdrawn,
	}}})
	return Change{State: n, Events: evs}, nil
}

// Expire handles a due deadline from the index. A deadline that is not the
// game's current one changes nothing (applied false).
//
// The current one is always applied, even when it finds nothing due: the
// sweeper drops an entry that is not applied once it is StaleAfter old, and
// a game whose current wake-up lost its entry is never looked at again (no
// flag, no milestone). A wake-up set on a milestone announced already (by a
// build that recomputed it from now after an excuse; see wake) is then
// moved to the next one in a change without events: its version stays, and
// only the index learns of it.
func Expire(st *State, atMs int64, now time.Time) (ch Change, applied bool, err error) {
	if st.Status.Finished() || st.WakeMs == 0 || st.WakeMs != atMs || atMs > ms(now) {
		return Change{}, false, nil
	}
	n := clone(st)
	var evs []*gamev1.Event
	switch {
	case n.Status == StatusSetup && ms(now) > setupDeadline(n):
		evs = setFormation(n, n.Turn(), rules.MaSangSangMa, true, now)
	case firstMoveDeadline(n) != 0 && ms(now) > firstMoveDeadline(n):
		evs = append(evs, abort(n, n.Turn(), now))
	case n.Clock != nil && n.Clock.Phase == clock.Running:
		evs = clockMilestones(n, now)
		if n.Clock.Flag(now) {
			evs = append(evs, endOnTime(n, rules.Side(n.Clock.Turn), now))
		}
	}
	n.WakeMs = wake(n, now)
	if len(evs) == 0 && n.WakeMs == st.WakeMs {
		return Change{}, false, nil
	}
	return Change{State: n, Events: evs}, true, nil
}

// Hold records that process proc holds a stream of side open. A seat's
// count is of the processes holding it; its connecting and disconnecting
// (the count leaving or reaching 0) are events, so that presence is
// versioned like everything else, while a change of which processes hold
// a connected seat is committed without one: a client whose reconnections
// land on another process each time adds nothing to its game's log, nor
// a connected seat announced again. Holding again records nothing, so a
// process may assert what it holds at any time. A finished game records
// nothing.
func Hold(st *State, side rules.Side, proc string) (Change, bool) {
	if st.Status.Finished() || slices.Contains(st.Holders[side], proc) {
		return Change{}, false
	}
	n := clone(st)
	n.Holders[side] = append(slices.Clip(st.Holders[side]), proc)
	n.Connections[side]++
	return Change{State: n, Events: connectionChanged(st, n, side), Presence: true}, true
}

// LetGo records that process proc holds no stream of side any more. A
// count stored before holders were named is taken down by any process.
func LetGo(st *State, side rules.Side, proc string) (Change, bool) {
	i := slices.Index(st.Holders[side], proc)
	if st.Status.Finished() || (i < 0 && st.Connections[side] <= len(st.Holders[side])) {
		return Change{}, false
	}
	n := clone(st)
	if i >= 0 {
		n.Holders[side] = slices.Delete(slices.Clone(st.Holders[side]), i, i+1)
	}
	n.Connections[side]--
	return Change{State: n, Events: connectionChanged(st, n, side), Presence: true}, true
}

// Release lets go of every seat process proc holds: the process is gone,
// without having recorded its streams closing.
func Release(st *State, proc string) (Change, bool) {
	var ch Change
	for _, side := range []rules.Side{rules.First, rules.Second} {
		if !slices.Contains(st.Holders[side], proc) {
			continue
		}
		next, ok := LetGo(st, side, proc)
		if !ok {
			continue
		}
		ch.State, st = next.State, next.State
		ch.Events = append(ch.Events, next.Events...)
		ch.Presence = true
	}
	return ch, ch.State != nil
}

// connectionChanged is the event of side's connecting or disconnecting
// from st to n, if it did.
func connectionChanged(st, n *State, side rules.Side) []*gamev1.Event {
	if (st.Connections[side] > 0) == (n.Connections[side] > 0) {
		return nil
	}
	return []*gamev1.Event{connection(n, side)}
}

func connection(st *State, side rules.Side) *gamev1.Event {
	return &gamev1.Event{Kind: &gamev1.Event_PlayerConnection{PlayerConnection: &gamev1.PlayerConnection{
		Side: rulespb.Side(side), Connected: st.Connections[side] > 0,
	}}}
}

// Seal numbers the events after prev and dates them, sets the state's
// version to the last one, and names the commit (State.Stamp, and
// State.LogStamp when it logs events) before anything shows the state.
func Seal(ch Change, prev uint64, now time.Time) {
	// Every commit has a stamp of its own, events or not, so that a process
	// holding the state before it conflicts instead of writing over it.
	ch.State.Stamp = strconv.FormatUint(rand.Uint64(), 36)
	if len(ch.Events) > 0 {
		ch.State.LogStamp = ch.State.Stamp
	}
	v := prev
	for _, e := range ch.Events {
		v++
		e.Version = v
		if e.Time == nil {
			e.Time = timestamppb.New(now)
		}
		if gc := e.GetGameCreated(); gc != nil {
			// The creation event carries the game as created.
			ch.State.Version = v
			gc.Game = Summary(ch.State, nil, now)
		}
	}
	ch.State.Version = v
	for _, e := range ch.Events {
		if e.GetPlayerConnection() == nil && e.GetClock() == nil {
			ch.State.PlayVersion = v
			break
		}
	}
}
