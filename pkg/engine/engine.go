package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/palacehq/palace/pkg/rules"
)

// ErrNoLegalMove is returned (with Result.Move == rules.NoMove) when the
// side to move has no legal move: it is checkmated, or stalemated in Xiangqi.
var ErrNoLegalMove = errors.New("engine: the side to move has no legal move")

// Options configure an Engine.
type Options struct {
	// HashMB is the transposition table size in MiB (default 16).
	HashMB int
	// Seed feeds the levels' randomness (Limits.Noise), together with
	// Limits.Seed and the position. Equal seeds give equal choices.
	Seed uint64
}

// Limits bound one search. Zero fields are "no limit of that kind"; the
// search stops at the first limit reached. With no limit at all (and not
// Infinite) the search runs for DefaultMoveTime.
type Limits struct {
	Depth    int           // iterations (plies, before extensions)
	Nodes    uint64        // nodes, counted in the main and quiescence search
	MoveTime time.Duration // wall time for this move
	Infinite bool          // run until Stop or the context ends
	// Analysis is for a caller that shows the search's lines (AIService
	// Analyze, or limits a client set): a forced move is searched as the
	// limits allow, not one ply, and the result is the last completed
	// iteration's, as the lines say, not a better move found in one cut
	// short.
	Analysis bool

	// Clock, indexed by rules.Side: remaining time and increment. The
	// engine budgets a share of the side to move's clock. MovesToGo is the
	// number of moves to the next time control, 0 for sudden death.
	Time      [2]time.Duration
	Inc       [2]time.Duration
	MovesToGo int

	// Noise, in centipawns, makes the engine play weaker and varied: every
	// root move is searched with a full window and scored exactly, a
	// pseudo-random offset in [-Noise, Noise] (from Options.Seed, Seed and
	// the position) is added to each, and the best sum is played. 0 plays
	// the best move found.
	Noise int
	Seed  uint64
}

// DefaultMoveTime bounds a search given no limit at all.
const DefaultMoveTime = time.Second

// Info is the state of the search after a completed iteration.
type Info struct {
	Depth, SelDepth int
	// Score is in centipawns from the side to move's view. When a forced
	// end of the game is seen, Mate is the number of plies to it, positive
	// when the side to move wins, negative when it loses (Score is then
	// ±(MateScore - plies)); otherwise Mate is 0.
	Score    int
	Mate     int
	Nodes    uint64
	NPS      uint64
	HashFull int // permille
	PV       []rules.Move
	Time     time.Duration
}

// Result is the outcome of a search.
type Result struct {
	Move     rules.Move // rules.NoMove only when there is no legal move
	Score    int
	Mate     int // as in Info
	PV       []rules.Move
	Nodes    uint64
	Depth    int
	SelDepth int
	Time     time.Duration
}

// MateScore is the score of a win at the root; a win n plies away scores
// MateScore - n.
const MateScore = mateScore

// Engine searches positions. One Engine runs one search at a time (Search
// calls are serialized); Stop may be called from any goroutine.
type Engine struct {
	mu   sync.Mutex // held for the length of a search
	opts Options
	tt   *table
	s    *searcher

	stopMu  sync.Mutex
	running *atomic.Bool // the current search's stop flag, nil when idle
}

// New returns an engine with an empty transposition table.
func New(opts Options) *Engine {
	if opts.HashMB <= 0 {
		opts.HashMB = 16
	}
	return &Engine{opts: opts, tt: newTable(opts.HashMB)}
}

// SetHashMB replaces the transposition table by an empty one of mb MiB. It
// waits for a running search to end.
func (e *Engine) SetHashMB(mb int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if mb <= 0 {
		mb = 16
	}
	e.opts.HashMB = mb
	e.tt = newTable(mb)
}

// Clear forgets everything learned by earlier searches (transposition
// table, history and killer tables), for a new game or a reproducible
// search. It waits for a running search to end.
func (e *Engine) Clear() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tt.clear()
	if e.s != nil {
		e.s.clearHeuristics()
	}
}

// Touch empties the transposition table by writing all of it, so that
// no later clear or search pays for the first touch of its memory: the
// system hands a new table over page by page on first write, seconds for
// gigabytes. It waits for a running search to end.
func (e *Engine) Touch() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tt.zero()
}

// Stop ends the running search, if any, as soon as possible; Search then
// returns the best move found so far.
func (e *Engine) Stop() {
	e.stopMu.Lock()
	if e.running != nil {
		e.running.Store(true)
	}
	e.stopMu.Unlock()
}

// SearchGame searches the current position of g, using its history for
// repetitions and the other adjudication rules.
func (e *Engine) SearchGame(ctx context.Context, g *rules.Game, lim Limits, onInfo func(Info)) (Result, error) {
	start, err := rules.ParseFEN(g.Variant(), g.Start())
	if err != nil {
		return Result{}, err
	}
	return e.Search(ctx, start, g.Moves(), lim, onInfo)
}

// Search searches the position reached by playing moves from start (a
// game's start position: the ply limits count from it) and returns the
// move to play. moves may be empty; each must be legal, else an error
// wrapping rules.ErrIllegalMove is returned. start is not changed.
//
// onInfo, if not nil, is called after every completed iteration, from the
// calling goroutine. The search ends at the first limit reached, when Stop
// is called, or when ctx ends; it always returns a legal move if there is
// one, and ErrNoLegalMove if there is none.
func (e *Engine) Search(ctx context.Context, start *rules.Position, moves []rules.Move, lim Limits, onInfo func(Info)) (Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.s == nil {
		e.s = newSearcher()
	}
	s := e.s
	if err := s.setup(start, moves); err != nil {
		return Result{}, err
	}

	stop := new(atomic.Bool)
	e.stopMu.Lock()
	e.running = stop
	e.stopMu.Unlock()
	defer func() {
		e.stopMu.Lock()
		e.running = nil
		e.stopMu.Unlock()
	}()
	if ctx.Done() != nil {
		if ctx.Err() != nil {
			stop.Store(true)
		}
		defer context.AfterFunc(ctx, func() { stop.Store(true) })()
	}

	e.tt.newSearch()
	s.tt = e.tt
	s.stop = stop
	s.seed = e.opts.Seed ^ lim.Seed*0x9e3779b97f4a7c15
	return s.run(lim, onInfo)
}

// setup loads the game into the searcher: the position after moves, and a
// state record for every position of the game, which repetition and the
// other adjudication rules look back on.
func (s *searcher) setup(start *rules.Position, moves []rules.Move) error {
	s.pos = start.Clone()
	s.variant = s.pos.Variant()
	s.janggi = s.variant == rules.Janggi
	if cap(s.st) < len(moves)+maxPly+2 {
		s.st = make([]state, 0, len(moves)+maxPly+64)
	}
	s.st = s.st[:0]
	s.histUndo = s.histUndo[:0]
	s.counts = [2][8]int8{}
	s.psq = [2]int32{}
	s.pcount = [2]uint8{}
	for sq := rules.Square(0); sq < rules.NumSquares; sq++ {
		pc := s.pos.PieceAt(sq)
		s.board[sq] = pc
		if pc != rules.NoPiece {
			side := pc.Side()
			s.pindex[sq] = s.pcount[side]
			s.plist[side][s.pcount[side]] = int8(sq)
			s.pcount[side]++
			s.counts[pc.Side()][pc.Kind()]++
			s.psq[pc.Side()] += int32(psqValue(s.variant, pc, int(sq)))
		}
	}
	s.st = append(s.st, state{
		hash:  s.pos.Hash(),
		check: s.pos.InCheck(),
	})
	s.st[0].facing = s.janggi && s.pos.GeneralsFacing()
	var buf [maxMoves]rules.Move
	for i, m := range moves {
		legal := s.pos.LegalMoves(buf[:0])
		if !slices.Contains(legal, m) {
			err := s.pos.CheckMove(m)
			if err == nil {
				err = fmt.Errorf("%w: %v", rules.ErrIllegalMove, m)
			}
			return fmt.Errorf("ply %d: %w", i+1, err)
		}
		s.make(m, 0)
		s.histUndo = append(s.histUndo, s.undo[0])
	}
	s.root = len(s.st) - 1
	return nil
}
