package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/palacehq/palace/pkg/rules"
)

// TestStalemateInOneIsFound: in Xiangqi a stalemate is a loss for the
// stalemated side, and the package scores it like a mate at the ply it
// happens. Here Red wins in one by stalemate: d8d9 leaves Black (two
// pinned chariots, two pinned elephants, a boxed-in general) without a
// legal move, not in check. Like any mate in one it must be found by a
// search of every depth from 1, even though the stalemated side's material
// puts its static evaluation far above beta: stand-pat, reverse futility
// and null-move pruning must not cut such a node off before its (empty)
// move list is known.
func TestStalemateInOneIsFound(t *testing.T) {
	const fen = "C1brkrb1C/9/3P5/9/9/9/9/9/9/3K5 w - - 0 1"
	g, err := rules.NewGame(rules.Xiangqi, fen)
	if err != nil {
		t.Fatal(err)
	}
	// The rules agree: d8d9 wins at once.
	c := g.Clone()
	if _, err := c.Play(mustMoves(t, "d8d9")[0]); err != nil {
		t.Fatal(err)
	}
	if o := c.Outcome(); !o.Ended || o.Method != rules.Stalemate || o.Winner != rules.FirstWins {
		t.Fatalf("test position: after d8d9 outcome %+v, want Red wins by stalemate", o)
	}
	var missed []string
	for depth := 1; depth <= 5; depth++ {
		res, err := New(Options{HashMB: 1}).SearchGame(context.Background(), g, Limits{Depth: depth}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Move.String() != "d8d9" || res.Mate != 1 {
			missed = append(missed, fmt.Sprintf("depth %d: %v score %d mate %d", depth, res.Move, res.Score, res.Mate))
		}
	}
	if len(missed) > 0 {
		t.Errorf("win in one by stalemate (d8d9, Mate 1) not found:\n%v", missed)
	}
}

// TestStalemateIsNotPrunedAway: each way a node may return before it
// generates its moves (stand-pat at depth 0, reverse futility at depths
// 1-3, null move from depth 3) must first make sure the side to move has a
// move. Black is stalemated and far ahead on material; searched with a
// null window well below its static evaluation at every depth, the node
// scores the loss, not the evaluation.
func TestStalemateIsNotPrunedAway(t *testing.T) {
	const fen = "C1brkrb1C/9/3P5/9/9/9/9/9/9/3K5 w - - 0 1"
	for depth := 0; depth <= 5; depth++ {
		s := newSearcher()
		if err := s.setup(mustFEN(t, rules.Xiangqi, fen), nil); err != nil {
			t.Fatal(err)
		}
		s.tt, s.stop, s.rootDepth = newTable(1), new(atomic.Bool), depth+1
		s.make(mustMoves(t, "d8d9")[0], 0)
		if e := s.evaluate(); e < 500 {
			t.Fatalf("test position: Black's evaluation %d, want it far above 0", e)
		}
		if v := s.search(depth, 1, -1, 0); v != -mateScore+1 {
			t.Errorf("depth %d: stalemated side scores %d, want %d (loss at ply 1)", depth, v, -mateScore+1)
		}
	}
}

// TestDepthOneDoesNotCaptureIntoBikjang: Cho's horse on e5 is the only
// piece between the generals, one capture from the first capture of the
// game. Taking the cannon (e5c6) leaves the generals facing with a capture
// made, so Han's reply pass (or any move that keeps the file open) ends
// the game by bikjang, and Han (27.5 - 7 = 20.5 points to Cho's 5) wins.
// Quiescence must count that pass as a floor under stand-pat, as it does
// for the pass back after a pass, so a depth-1 search (levels 1 and 2)
// plays a move that loses nothing at once (a quiet move that keeps the
// file closed, a pass, or a check, which Han may not answer with a pass).
func TestDepthOneDoesNotCaptureIntoBikjang(t *testing.T) {
	const fen = "3a1a2r/4k4/9/9/2c6/4N4/9/9/4K4/9 w - - 0 1"
	g, err := rules.NewGame(rules.Janggi, fen)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		lim  Limits
	}{
		{"depth 1", Limits{Depth: 1}},
		{"level 1", Level(1).Limits(1)},
		{"level 2", Level(2).Limits(1)},
	} {
		res, err := New(Options{HashMB: 1}).SearchGame(context.Background(), g, tc.lim, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := g.Clone()
		if _, err := c.Play(res.Move); err != nil {
			t.Fatal(err)
		}
		if c.Outcome().Ended || c.Position().InCheck() {
			continue // over already, or Han in check may not pass
		}
		pass := rules.NewMove(c.Position().GeneralSquare(rules.Second), c.Position().GeneralSquare(rules.Second))
		if _, err := c.Play(pass); err != nil {
			t.Fatal(err)
		}
		if o := c.Outcome(); o.Ended && o.Winner == rules.SecondWins {
			t.Errorf("%s: plays %v (score %d, mate %d); Han's reply pass ends the game at once: %v, Han wins", tc.name, res.Move, res.Score, res.Mate, o.Method)
		}
	}
}

// TestQuickMoveIsLegal: the moves that spare the stalemate test the move
// generator are legal in every position they are asked about (Xiangqi,
// side to move not in check), and stalemated agrees with the move
// generator.
func TestQuickMoveIsLegal(t *testing.T) {
	s := newSearcher()
	check := func(where string) {
		t.Helper()
		if s.top().check {
			return
		}
		legal := s.pos.LegalMoves(nil)
		us := s.pos.Turn()
		g := int(s.pos.GeneralSquare(us))
		for _, c := range []struct {
			name string
			m    rules.Move
		}{
			{"quickMove", s.quickMove()},
			{"pieceMove(whole shield)", s.pieceMove(us, shields[g].all)},
			{"pieceMove(sparse shield)", s.pieceMove(us, s.sparseShield(g, us^1))},
			{"generalStep", s.generalStep(us, g)},
		} {
			if c.m != rules.NoMove && !slices.Contains(legal, c.m) {
				t.Fatalf("%s %v: %s %v is not legal", where, s.pos.FEN(), c.name, c.m)
			}
		}
		if got, want := s.stalemated(0), len(legal) == 0; got != want {
			t.Fatalf("%s %v: stalemated %v, want %v", where, s.pos.FEN(), got, want)
		}
	}
	for _, tc := range []struct {
		fen        string
		stalemated bool
	}{
		{"C1brkrb1C/3P5/9/9/9/9/9/9/9/3K5 b - - 0 1", true}, // after d8d9 above
		{"C1brkrb1C/9/3P5/9/9/9/9/9/9/3K5 b - - 0 1", false},
		{"4k4/9/9/9/9/9/9/9/4A4/3AK4 w - - 0 1", false},
		{"3k5/9/9/9/9/9/9/9/2R1p4/4K4 w - - 0 1", false},
	} {
		if err := s.setup(mustFEN(t, rules.Xiangqi, tc.fen), nil); err != nil {
			t.Fatal(err)
		}
		check("position")
		if got := s.stalemated(0); got != tc.stalemated {
			t.Errorf("%v: stalemated %v, want %v", tc.fen, got, tc.stalemated)
		}
	}
	rng := rand.New(rand.NewPCG(5, 8))
	if err := s.setup(mustFEN(t, rules.Xiangqi, rules.StartFEN(rules.Xiangqi)), nil); err != nil {
		t.Fatal(err)
	}
	for game := 0; game < 400; game++ {
		depth := 0
		for ; depth < 90; depth++ {
			check(fmt.Sprintf("game %d ply %d", game, depth))
			moves := s.pos.LegalMoves(nil)
			if len(moves) == 0 {
				break
			}
			// Prefer captures, so that the games reach sparse endgames.
			m := moves[rng.IntN(len(moves))]
			for _, c := range moves {
				if s.pos.PieceAt(c.To()) != rules.NoPiece && rng.IntN(2) == 0 {
					m = c
					break
				}
			}
			s.make(m, depth)
		}
		for depth--; depth >= 0; depth-- {
			s.unmake(depth)
		}
	}
}

// TestARepetitionAtThePlyLimitWasDatedAtItsThirdOccurrence: a Janggi search line whose
// position comes back a second time at game ply 200 ends the game there
// (200 plies, on points), but the engine dated that end one cycle later,
// at a third occurrence never played: mate_in too long.
func TestARepetitionAtThePlyLimitWasDatedAtItsThirdOccurrence(t *testing.T) {
	const fen = "3k4n/9/9/9/9/9/9/9/9/R3K4 w - - 0 1"
	var g *rules.Game
	for seed := uint64(1); seed < 200 && (g == nil || g.Plies() < 195); seed++ {
		var err error
		g, err = rules.NewGame(rules.Janggi, fen)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 9))
		for tries := 0; g.Plies() < 195 && tries < 5000; tries++ {
			l := g.LegalMoves()
			m := l[rng.IntN(len(l))]
			if !m.IsPass() && g.Position().PieceAt(m.To()) != rules.NoPiece {
				continue
			}
			c := g.Clone()
			if _, err := c.Play(m); err != nil || c.Outcome().Ended {
				continue
			}
			g = c
		}
	}
	if g.Plies() != 195 {
		t.Skipf("history of %d plies only", g.Plies())
	}
	start, _ := rules.ParseFEN(rules.Janggi, fen)
	// Find a line m1, then a 4-ply cycle, that the game plays to ply 200.
	var line []rules.Move
	for _, m1 := range g.LegalMoves() {
		if m1.IsPass() || g.Position().PieceAt(m1.To()) != rules.NoPiece {
			continue
		}
		g1 := g.Clone()
		if _, err := g1.Play(m1); err != nil || g1.Outcome().Ended {
			continue
		}
		for _, m2 := range g1.LegalMoves() {
			if m2.IsPass() || g1.Position().PieceAt(m2.To()) != rules.NoPiece {
				continue
			}
			g2 := g1.Clone()
			if _, err := g2.Play(m2); err != nil || g2.Outcome().Ended {
				continue
			}
			for _, m3 := range g2.LegalMoves() {
				if m3.IsPass() || g2.Position().PieceAt(m3.To()) != rules.NoPiece {
					continue
				}
				g3 := g2.Clone()
				if _, err := g3.Play(m3); err != nil || g3.Outcome().Ended {
					continue
				}
				m4, m5 := rules.NewMove(m2.To(), m2.From()), rules.NewMove(m3.To(), m3.From())
				g4 := g3.Clone()
				if _, err := g4.Play(m4); err != nil || g4.Outcome().Ended {
					continue
				}
				g5 := g4.Clone()
				if _, err := g5.Play(m5); err != nil || !g5.Outcome().Ended {
					continue
				}
				line = []rules.Move{m1, m2, m3, m4, m5}
				t.Logf("game after the line: %v", g5.Outcome())
				break
			}
			if line != nil {
				break
			}
		}
		if line != nil {
			break
		}
	}
	if line == nil {
		t.Skip("no line found")
	}
	s := newSearcher()
	if err := s.setup(start, g.Moves()); err != nil {
		t.Fatal(err)
	}
	for ply, m := range line {
		s.make(m, ply)
	}
	v, ended := s.adjudicate(len(line))
	if !ended || mateIn(v) == 0 {
		t.Fatalf("line %v: not scored as decided (%d, %v)", line, v, ended)
	}
	if d := abs(mateIn(v)); d != len(line) {
		t.Errorf("line %v: the game ends after %d plies (ply 200), the search scores the end %d plies away (mate_in %d)", line, len(line), d, mateIn(v))
	}
}

// TestASearchClaimedALossWhereTheRulesGaveADraw: Xiangqi, Red (rook
// and general) against Black's two chariots, which mate at once whenever
// Red stops checking. The game went Ra10-a8 (a quiet move) Ke9-e10 from
// the start position Q (Ra10, Ke9, Red to move). From here Red checks
// a8a10, a10a9, a9a10: each of Black's replies is its only legal move, and
// the last brings Q back a third time. The window of that repetition
// starts at Q's first occurrence and holds Red's quiet a10a8, so the rules
// call it a plain repetition: a draw. The engine reported a forced loss
// (mate_in -9), judging the second occurrence of Ra10/Ke10 in its line
// over that cycle alone (all checks: perpetual check, Red loses).
func TestASearchClaimedALossWhereTheRulesGaveADraw(t *testing.T) {
	const fen = "R8/4k4/4p4/9/9/9/9/6r2/7r1/3K5 w - - 0 1"
	g, err := rules.NewGame(rules.Xiangqi, fen)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mustMoves(t, "a10a8", "e9e10") {
		if _, err := g.Play(m); err != nil {
			t.Fatal(err)
		}
	}
	// The rules: Red forces a draw, every Black reply being forced.
	c := g.Clone()
	for i, m := range mustMoves(t, "a8a10", "e10e9", "a10a9", "e9e10", "a9a10", "e10e9") {
		if i%2 == 1 {
			if l := c.LegalMoves(); len(l) != 1 || l[0] != m {
				t.Fatalf("Black's reply %v is not forced: %v", m, l)
			}
		}
		if _, err := c.Play(m); err != nil {
			t.Fatal(err)
		}
	}
	if o := c.Outcome(); !o.Ended || o.Winner != rules.Draw {
		t.Fatalf("rules: %v, want a draw", o)
	}
	res, err := New(Options{HashMB: 4}).SearchGame(context.Background(), g, Limits{Depth: 8, Analysis: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Mate < 0 {
		t.Errorf("SearchGame depth 8: %v, mate_in %d (score %d, pv %v): a forced loss for Red, but Red forces a draw by the rules: a8a10 e10e9 a10a9 e9e10 a9a10 e10e9 (%v)", res.Move, res.Mate, res.Score, res.PV, c.Outcome())
	}
}

// TestADecidedLineStoppedShortOfItsEnd: a decided score (Mate != 0) came
// with a pv that, played through rules.Game, neither ended the game nor
// brought a position back a second time (the one case where mate_in counts
// plies past the pv): the pv stopped one ply short of the end it counted.
// Case 1: the quiescence search scored a Janggi pass that ends the game
// (two passes) as its stand pat, and left the pass out of the pv. Case 2:
// a pv node's window, narrowed to null width by mate-distance bounds, took
// a transposition-table cut, and the pv lost its last ply (e2d2, the
// repetition that ends the game).
func TestADecidedLineStoppedShortOfItsEnd(t *testing.T) {
	cases := []struct {
		fen   string
		moves string
		depth int
	}{
		{"4k4/9/9/9/9/9/9/9/9/3K1R3 b - - 0 1", "e10d10 d1e1 d10e10", 2},
		{"4k4/9/9/9/9/9/9/9/9/3K1R3 b - - 0 1", "e10d10 f1f10 d10d9 f10h10 d9e9 h10g10 e9f9 g10g3 f9e9 d1d2 e9f9 g3g2 f9f10 g2f2 f10e9 f2f9 e9e8 f9i9 e8f8 i9a9 f8e8", 5},
	}
	for _, tc := range cases {
		g, err := rules.NewGame(rules.Janggi, tc.fen)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mustMoves(t, strings.Fields(tc.moves)...) {
			if _, err := g.Play(m); err != nil {
				t.Fatal(err)
			}
		}
		res, err := New(Options{HashMB: 2}).SearchGame(context.Background(), g, Limits{Depth: tc.depth, Analysis: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Mate == 0 {
			t.Fatalf("depth %d: no decided score (%d, pv %v)", tc.depth, res.Score, res.PV)
		}
		c := g.Clone()
		for _, m := range res.PV {
			if _, err := c.Play(m); err != nil {
				t.Fatalf("pv %v: %v", res.PV, err)
			}
		}
		hs := hashesOf(t, rules.Janggi, tc.fen, c.Moves())
		n, second := len(hs)-1, false
		for i := n - 2; i > g.Plies(); i -= 2 {
			second = second || hs[i] == hs[n]
		}
		if !c.Outcome().Ended && !second {
			t.Errorf("depth %d: mate_in %d with pv %v (%d plies): after the pv the game goes on (%v) and no position has come back", tc.depth, res.Mate, res.PV, len(res.PV), c.Outcome())
		}
	}
}
