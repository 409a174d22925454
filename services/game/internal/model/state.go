// Package model is the game service's domain: a game's stored state and
// the commands that change it. Commands are pure functions of a state, a
// request and the server time; they return the next state and the events
// to append, or a domain error, and never touch Redis. The store commits
// what they return atomically.
package model

import (
	"sync/atomic"
	"time"

	"github.com/palacehq/palace/pkg/clock"
	"github.com/palacehq/palace/pkg/rules"
)

// Status is where a game is in its life.
type Status string

const (
	StatusSetup   Status = "setup"
	StatusOngoing Status = "ongoing"
	StatusEnded   Status = "ended"
	StatusAborted Status = "aborted"
)

// Finished reports whether the game takes no more commands.
func (s Status) Finished() bool { return s == StatusEnded || s == StatusAborted }

// Seat is one player's place.
type Seat struct {
	PlayerID string `json:"pid,omitempty"`
	Name     string `json:"name,omitempty"`
	// AILevel is 1..10 when the AI plays the seat, 0 for a human.
	AILevel int `json:"ai,omitempty"`
}

// MoveRec is one played ply as stored.
type MoveRec struct {
	Move     string `json:"m"`
	Notation string `json:"n"`
	Check    bool   `json:"c,omitempty"`
	Pass     bool   `json:"p,omitempty"`
	Captured string `json:"x,omitempty"`
	AtMs     int64  `json:"t"`
	// Clock is both clocks right after the move (nil without a clock).
	Clock *clock.Snapshot `json:"k,omitempty"`
	// IncMs, RefillMs and LagMs are what the move earned its mover (see
	// clock.Earned: the Fischer increment, the byo-yomi period filled
	// again, the lag bank's refill): an undo of the human's move withdraws
	// them (an AI's reply keeps them). What a move earns depends on the
	// clock as it was played, which an undo past the first moves changes,
	// so it is kept rather than worked out again.
	IncMs    int64 `json:"i,omitempty"`
	RefillMs int64 `json:"r,omitempty"`
	LagMs    int64 `json:"l,omitempty"`
}

// earned is what the move earned its mover, as clock.TakeBack withdraws it.
func (m MoveRec) earned() clock.Earned {
	return clock.Earned{MainMs: m.IncMs, PeriodMs: m.RefillMs, LagMs: m.LagMs}
}

// Result is how a game ended.
type Result struct {
	Winner rules.Winner `json:"w"`
	// Method is a rules.Method, or MethodAborted.
	Method rules.Method `json:"m"`
	Points [2]float64   `json:"pts"`
	// Side caused the ending (resigned, flagged, did not move, aborted), if
	// any.
	Side *rules.Side `json:"s,omitempty"`
}

// MethodAborted marks a game aborted without result (no first move in
// time, or a player's Abort before the game began). Its value is END_METHOD_ABORTED of the proto enum, just past the
// rules' own methods.
const MethodAborted rules.Method = 13

// Format is the newest format of a stored State this build writes
// correctly. During a rolling upgrade an older build writes games too,
// and would drop the fields it does not know: a build that adds a field
// whose loss or misreading would wrong a game raises Format, and sets
// Needs in every state that uses the field, so that older builds from
// this one on leave such a game to the newer ones.
const Format = 1

// State is everything stored about one game.
type State struct {
	ID      string `json:"id"`
	Version uint64 `json:"v"`
	// Needs is the oldest Format a process must know to write this state
	// (0: any).
	Needs int `json:"needs,omitempty"`
	// PlayVersion is the version after the last commit that changed more
	// than presence and clock milestones (0 in states stored before it
	// existed: Version). A command's expected_version from then on is
	// current: a seat connecting, or a byo-yomi period starting, changes
	// nothing a client decided its command on.
	PlayVersion uint64 `json:"pv,omitempty"`
	// Stamp is a random token of the commit that stored this state. A
	// commit's compare-and-set checks it with the version: should Redis
	// lose a commit and another bring the game back to the same version,
	// a process that cached the lost state must not build on it.
	Stamp string `json:"stamp,omitempty"`
	// LogStamp is the Stamp of the last commit that logged events: the
	// one the log's last event carries (store.MarkEvent), which streams
	// check the game against. A commit without events (a wake-up moved
	// on) leaves it. "" when not known: a state stored before events
	// carried stamps, or by a build that knew nothing of them.
	LogStamp string `json:"lstamp,omitempty"`
	// Held is how long the commit that began a turn was held past the
	// judgment the turn began at, as Redis' clock measured it when the
	// hold was a second or more (store.HoldExcusedAfter): that turn began
	// before anyone could see the move, and whoever judges it next excuses
	// it the hold (handler.excuse). Kept beside the state, in a field of
	// its own that the commit script writes.
	Held    TurnHold      `json:"-"`
	Variant rules.Variant `json:"var"`
	Status  Status        `json:"st"`
	Seats   [2]Seat       `json:"seats"`
	Public  bool          `json:"pub,omitempty"`
	Rated   bool          `json:"rated,omitempty"`
	// PlayersMayAbort lets either seat abort the game before it begins
	// (Abort).
	PlayersMayAbort bool `json:"may_abort,omitempty"`
	// Begun is set once both first moves are made, and stays set through
	// undos: the game can no longer be aborted.
	Begun bool `json:"begun,omitempty"`
	// StartFEN is the position the moves are played from: the custom
	// start, or (Janggi) the one the formations give once both are chosen.
	StartFEN string `json:"start"`
	// FirstTurn is the side to move in StartFEN.
	FirstTurn   rules.Side         `json:"ft"`
	CustomStart bool               `json:"custom,omitempty"`
	Formations  [2]rules.Formation `json:"form"`
	// Moves are stored apart from the rest of the state (see the store).
	Moves []MoveRec `json:"-"`
	// Clock is nil for games without a clock.
	Clock *clock.State `json:"clock,omitempty"`
	// ClockEventsMs is the instant up to which byo-yomi milestones have
	// been announced, so each is announced exactly once.
	ClockEventsMs int64 `json:"clkev,omitempty"`
	// Undos counts the undos taken (see MaxUndos).
	Undos int `json:"undos,omitempty"`
	// DrawOffer is the side with a pending offer, or nil.
	DrawOffer *rules.Side `json:"draw,omitempty"`
	// DrawBarred marks, by side, a side whose offer was declined and who
	// has not moved since: it may not offer again until it moves, so that
	// its opponent is not asked again and again in one position.
	DrawBarred [2]bool `json:"drawBarred,omitzero"`
	Result     *Result `json:"res,omitempty"`
	// Connections counts, per seat, the processes holding a stream of it
	// open: its Holders, plus any count stored before holders were named.
	Connections [2]int `json:"conn"`
	// Holders are the processes holding a stream of each seat open, named
	// so that the holdings of a process that died can be released.
	Holders [2][]string `json:"hold,omitempty"`

	SetupTimeMs     int64 `json:"setup_ms"`
	FirstMoveTimeMs int64 `json:"first_ms"`
	// SetupDeadlineMs is when the side choosing a formation gets the
	// default one (setup only).
	SetupDeadlineMs int64 `json:"setup_dl,omitempty"`
	// TurnStartMs is when the side to move got the turn (first-move rule).
	TurnStartMs int64 `json:"turn_ms,omitempty"`
	// WaitExcusedMs is how much of the present wait for a formation or a
	// first move is excused for storage outages, in which nobody could
	// choose or move: its deadline is that much later. Each wait starts
	// with nothing excused (as a clock's turn does).
	WaitExcusedMs int64 `json:"wait_ex,omitempty"`
	// WakeMs is the next instant the game must be looked at without a
	// request (0: none). It is what the deadline index holds.
	WakeMs int64 `json:"wake,omitempty"`

	CreatedMs int64 `json:"created"`
	EndedMs   int64 `json:"ended,omitempty"`
	// ExpiryExtendedMs is when the store last extended the game's expiry,
	// and KeptUntilMs when that expiry falls (0 in states stored before it
	// was recorded: then LiveTTL and its slack after ExpiryExtendedMs).
	ExpiryExtendedMs int64 `json:"exp_ms,omitempty"`
	KeptUntilMs      int64 `json:"kept_ms,omitempty"`

	// replayed is the moves already replayed, when known: a command needs
	// the rules' view of the game, and replaying hundreds of plies for
	// every move would dominate the cost of a move.
	replayed *rules.Game
	// movesEnd is the number of moves written in the array behind Moves,
	// shared by every state using that array (see appendMove); nil when
	// Moves was not built by appendMove.
	movesEnd *atomic.Int64
}

// TurnHold is a commit's hold: the turn it began at its judgment
// (TurnStartMs, the start of what runs as Waiting tells it) and how long
// the commit took to land after it (Ms); zero when none.
type TurnHold struct {
	TurnStartMs, Ms int64
}

// SetReplayed hands the state the replayed game of exactly its moves (a
// cache hit); it must not be changed afterwards.
func (s *State) SetReplayed(g *rules.Game) { s.replayed = g }

// Replayed is the replayed game after a command, or nil.
func (s *State) Replayed() *rules.Game { return s.replayed }

// HasAI reports whether the AI plays a seat.
func (s *State) HasAI() bool { return s.Seats[0].AILevel > 0 || s.Seats[1].AILevel > 0 }

// Game replays the moves into a rules.Game. Stored states were built by
// the same replay, so an error here means corrupt data.
func (s *State) Game() (*rules.Game, error) {
	if s.replayed != nil && s.replayed.Plies() == len(s.Moves) {
		return s.replayed.Clone(), nil
	}
	g, err := rules.NewGame(s.Variant, s.StartFEN)
	if err != nil {
		return nil, err
	}
	for _, m := range s.Moves {
		mv, err := rules.ParseMove(m.Move)
		if err != nil {
			return nil, err
		}
		if _, err := g.Play(mv); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// Turn is the side to move (ongoing) or to choose a formation (setup).
func (s *State) Turn() rules.Side {
	// A Janggi game has no board until both formations are chosen: one
	// that ended before that (resigned, aborted) keeps the turn of the
	// side that was choosing.
	if s.Status == StatusSetup || s.StartFEN == "" {
		if s.Formations[rules.Second] == 0 {
			return rules.Second
		}
		return rules.First
	}
	if len(s.Moves)%2 == 0 {
		return s.FirstTurn
	}
	return s.FirstTurn.Opponent()
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// Current reports whether a command's expected version is current: no
// later commit changed more than presence and clock milestones.
func (s *State) Current(expected uint64) bool {
	played := s.PlayVersion
	if played == 0 {
		played = s.Version
	}
	return played <= expected && expected <= s.Version
}
