package rules

import (
	"errors"
	"fmt"
	"slices"
)

var (
	// ErrGameOver: the game has ended, so it takes no more moves or results.
	ErrGameOver = errors.New("game over")
	// ErrNotAllowed: the request is well formed but the rules do not offer
	// it (a draw by agreement in Janggi, a side that does not exist).
	ErrNotAllowed = errors.New("not allowed by the rules")
)

// Ply limits of docs/rules.md, "How a game ends" and the Xiangqi draws.
const (
	janggiMaxPlies        = 200
	xiangqiNoCapturePlies = 120
)

// MoveInfo describes one ply after Game.Play accepted it.
type MoveInfo struct {
	Ply      int // 1 for the first ply of the game
	Move     Move
	Side     Side // the side that moved
	Captured Piece
	Check    bool // the opponent is in check after the move
	Pass     bool
	Notation string // WXF (Xiangqi) or Janggi notation, see Notation
}

// plyRecord keeps what adjudication needs to know about a past ply, so no
// rule ever has to replay the game (except the rare perpetual-chase test).
type plyRecord struct {
	captured Piece
	check    bool // the side to move after this ply is in check
	facing   bool // the generals face each other after this ply
}

// Game is one game from a start position: its moves and its adjudication
// (docs/rules.md "How a game ends" and "Order and counting"). It is not safe for
// concurrent use; Clone it to hand a copy to another goroutine.
//
// Where docs/rules.md leaves room, Game reads it so:
//   - Everything is counted from the start position, never from the FEN's
//     counters: plies, the plies since the last capture, and the capture
//     that makes bikjang count, which must have been made in this game.
//   - Bikjang needs the generals facing after two consecutive plies of this
//     game; facing in the start position is not "after a move".
//   - A Janggi pass is a move that gives no check, for perpetual check.
//   - Repetition compares Zobrist hashes (board and side to move).
//   - Perpetual chase is read as documented in chase.go.
type Game struct {
	start   *Position // never changed: the perpetual-chase test replays from it
	pos     *Position
	moves   []Move
	plies   []plyRecord
	hashes  []uint64 // hashes[i] is the position after i plies
	legal   []Move   // legal moves in pos, computed once per ply
	lastCap int      // ply of the last capture, 0 if none yet
	caps    int      // captures so far
	outcome Outcome
}

// NewGame starts a game of v from startFEN ("" for the standard start
// position of v). A start position in which the side to move has no legal
// move, or (Xiangqi) neither side can win, is adjudicated at once: those
// endings depend on the position alone, and a game that could never take
// a move must not stay open.
func NewGame(v Variant, startFEN string) (*Game, error) {
	if startFEN == "" {
		startFEN = StartFEN(v)
	}
	p, err := ParseFEN(v, startFEN)
	if err != nil {
		return nil, err
	}
	g := &Game{
		start:  p.Clone(),
		pos:    p,
		hashes: []uint64{p.Hash()},
		legal:  p.LegalMoves(make([]Move, 0, 64)),
	}
	switch {
	case len(g.legal) == 0:
		g.endNoMoves()
	case v == Xiangqi && insufficientMaterial(p):
		g.end(Draw, InsufficientMaterial)
	default:
		g.outcome.Points = g.points()
	}
	return g, nil
}

func (g *Game) Variant() Variant { return g.pos.Variant() }

// Start is the canonical FEN of the start position.
func (g *Game) Start() string { return g.start.FEN() }

// Position returns a copy of the current position; changing it does not
// change the game.
func (g *Game) Position() *Position { return g.pos.Clone() }

// Moves returns a copy of the moves played so far (passes included).
func (g *Game) Moves() []Move { return slices.Clone(g.moves) }

// Plies is the number of moves and passes played since the start position.
func (g *Game) Plies() int { return len(g.moves) }

// LegalMoves returns the moves Play would accept now: none once the game
// has ended.
func (g *Game) LegalMoves() []Move {
	if g.outcome.Ended {
		return nil
	}
	return slices.Clone(g.legal)
}

func (g *Game) Outcome() Outcome { return g.outcome }

// Clone returns an independent copy of the game.
func (g *Game) Clone() *Game {
	c := *g
	c.start = g.start.Clone()
	c.pos = g.pos.Clone()
	c.moves = slices.Clone(g.moves)
	c.plies = slices.Clone(g.plies)
	c.hashes = slices.Clone(g.hashes)
	c.legal = slices.Clone(g.legal)
	return &c
}

// Play makes m, a move or (Janggi) a pass written as the general's square
// twice, and then applies every ending rule. It is atomic: when it returns
// an error the game is exactly as before. An illegal move gives an error
// wrapping ErrIllegalMove that names the ply and the reason; a move after
// the end gives one wrapping ErrGameOver.
func (g *Game) Play(m Move) (MoveInfo, error) {
	ply := len(g.moves) + 1
	if g.outcome.Ended {
		return MoveInfo{}, fmt.Errorf("ply %d: move %v: %w: it ended by %v", ply, m, ErrGameOver, g.outcome.Method)
	}
	if !slices.Contains(g.legal, m) {
		err := g.pos.CheckMove(m)
		if err == nil { // CheckMove promises to agree with LegalMoves; stay safe if not
			err = &MoveError{Move: m, Reason: "it is not a legal move here"}
		}
		return MoveInfo{}, fmt.Errorf("ply %d: %w", ply, err)
	}
	info := MoveInfo{Ply: ply, Move: m, Side: g.pos.Turn(), Pass: m.IsPass(), Notation: notationOf(g.pos, m)}
	// Nothing below can fail, which is what makes Play atomic.
	u := g.pos.Make(m)
	info.Captured = u.Captured
	info.Check = g.pos.InCheck()
	g.moves = append(g.moves, m)
	g.plies = append(g.plies, plyRecord{captured: u.Captured, check: info.Check, facing: g.pos.GeneralsFacing()})
	g.hashes = append(g.hashes, g.pos.Hash())
	if u.Captured != NoPiece {
		g.lastCap = ply
		g.caps++
	}
	g.legal = g.pos.LegalMoves(g.legal[:0])
	g.adjudicate()
	return info, nil
}

// Resign ends the game as a loss for loser.
func (g *Game) Resign(loser Side) error { return g.endBy(loser, Resignation) }

// Timeout ends the game as a loss for loser, whose clock ran out.
func (g *Game) Timeout(loser Side) error { return g.endBy(loser, Timeout) }

// AgreeDraw ends a Xiangqi game drawn by agreement; Janggi has no such draw.
func (g *Game) AgreeDraw() error {
	if err := g.checkOpen("agree to a draw"); err != nil {
		return err
	}
	if g.Variant() != Xiangqi {
		return fmt.Errorf("agree to a draw: %w: %v has no draw by agreement", ErrNotAllowed, g.Variant())
	}
	g.end(Draw, Agreement)
	return nil
}

func (g *Game) endBy(loser Side, m Method) error {
	if err := g.checkOpen(m.String()); err != nil {
		return err
	}
	if loser > Second {
		return fmt.Errorf("%v: %w: %v is not a side", m, ErrNotAllowed, loser)
	}
	g.end(winnerFor(loser.Opponent()), m)
	return nil
}

func (g *Game) checkOpen(action string) error {
	if g.outcome.Ended {
		return fmt.Errorf("%s: %w: it ended by %v", action, ErrGameOver, g.outcome.Method)
	}
	return nil
}

// points is the Outcome.Points of the current position.
func (g *Game) points() [2]float64 {
	if g.Variant() != Janggi {
		return [2]float64{}
	}
	return [2]float64{g.pos.Points(First), g.pos.Points(Second)}
}

func (g *Game) end(w Winner, m Method) {
	g.outcome = Outcome{Ended: true, Winner: w, Method: m, Points: g.points()}
}

// endOnPoints ends a Janggi game on points; Han's 1.5 rules out a tie.
func (g *Game) endOnPoints(m Method) {
	w := SecondWins
	if g.pos.Points(First) > g.pos.Points(Second) {
		w = FirstWins
	}
	g.end(w, m)
}

// endNoMoves handles a side to move without a legal move: it loses, by
// checkmate when in check (Janggi always, since a player not in check may
// pass), else by stalemate (Xiangqi).
func (g *Game) endNoMoves() {
	m := Checkmate
	if !g.pos.InCheck() {
		m = Stalemate
	}
	g.end(winnerFor(g.pos.Turn().Opponent()), m)
}

// adjudicate applies the ending rules after a ply, in the order of docs/rules.md
// "Order and counting"; the first that holds names the method.
func (g *Game) adjudicate() {
	n := len(g.moves)
	if g.Variant() == Janggi {
		switch {
		case n >= 2 && g.moves[n-1].IsPass() && g.moves[n-2].IsPass():
			g.endOnPoints(TwoPasses)
		case len(g.legal) == 0:
			g.endNoMoves()
		case n >= 2 && g.plies[n-1].facing && g.plies[n-2].facing && g.caps > 0:
			g.endOnPoints(Bikjang)
		case g.repetition():
		case n >= janggiMaxPlies:
			g.endOnPoints(MoveLimit)
		default:
			g.outcome.Points = g.points()
		}
		return
	}
	switch {
	case len(g.legal) == 0:
		g.endNoMoves()
	case g.repetition():
	case n-g.lastCap >= xiangqiNoCapturePlies:
		g.end(Draw, MoveLimit)
	case g.plies[n-1].captured != NoPiece && insufficientMaterial(g.pos):
		g.end(Draw, InsufficientMaterial)
	}
}

// insufficientMaterial reports that neither side has a piece able to cross
// the Xiangqi river (chariot, horse, cannon or soldier).
func insufficientMaterial(p *Position) bool {
	for sq := Square(0); sq < NumSquares; sq++ {
		switch p.PieceAt(sq).Kind() {
		case Chariot, Horse, Cannon, Soldier:
			return false
		}
	}
	return true
}
