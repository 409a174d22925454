package rules

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func mustGame(tb testing.TB, v Variant, fen string) *Game {
	tb.Helper()
	g, err := NewGame(v, fen)
	if err != nil {
		tb.Fatalf("NewGame(%v, %q): %v", v, fen, err)
	}
	return g
}

func mustMove(tb testing.TB, s string) Move {
	tb.Helper()
	m, err := ParseMove(s)
	if err != nil {
		tb.Fatalf("ParseMove(%q): %v", s, err)
	}
	return m
}

// playMoves plays coordinate moves (space separated) and fails on the first
// refused one.
func playMoves(tb testing.TB, g *Game, moves string) []MoveInfo {
	tb.Helper()
	var infos []MoveInfo
	for _, s := range strings.Fields(moves) {
		info, err := g.Play(mustMove(tb, s))
		if err != nil {
			tb.Fatalf("after %v: Play(%s): %v", g.Moves(), s, err)
		}
		infos = append(infos, info)
	}
	return infos
}

// repeatMoves returns moves written n times, space separated.
func repeatMoves(moves string, n int) string {
	return strings.TrimSpace(strings.Repeat(moves+" ", n))
}

var endingTests = []struct {
	name       string
	variant    Variant
	fen        string // "" for the start position
	moves      string
	wantEnded  bool
	wantWinner Winner
	wantMethod Method
	wantPoints [2]float64 // checked for Janggi only
}{
	{
		name: "janggi checkmate", variant: Janggi,
		fen:   "4k4/R8/9/9/9/9/9/9/1R7/3K5 w - - 0 1",
		moves: "b2b10", wantEnded: true, wantWinner: FirstWins, wantMethod: Checkmate,
		wantPoints: [2]float64{26, 1.5},
	},
	{
		name: "janggi checkmate of cho by han", variant: Janggi,
		fen:   "3k5/9/1r7/9/9/9/9/9/r8/4K4 b - - 0 1",
		moves: "b8b1", wantEnded: true, wantWinner: SecondWins, wantMethod: Checkmate,
		wantPoints: [2]float64{0, 27.5},
	},
	{
		name: "xiangqi checkmate", variant: Xiangqi,
		fen:   "4k4/R8/9/9/9/9/9/9/1R7/3K5 w - - 0 1",
		moves: "b2b10", wantEnded: true, wantWinner: FirstWins, wantMethod: Checkmate,
	},
	{
		name: "xiangqi stalemate loses", variant: Xiangqi,
		fen:   "4k4/9/R8/9/9/5R3/9/9/9/3K5 w - - 0 1",
		moves: "a8a9", wantEnded: true, wantWinner: FirstWins, wantMethod: Stalemate,
	},
	{
		// The generals face after Cho's d2e2 and still after Han's reply,
		// but nothing has been captured yet.
		name: "bikjang before any capture has no effect", variant: Janggi,
		fen:   "r8/4k4/p8/9/9/9/9/9/3K5/R7R w - - 0 1",
		moves: "d2e2 a10b10 i1i2", wantEnded: false,
		wantPoints: [2]float64{26, 16.5},
	},
	{
		// The start lacks 29 pieces and its counters say move 40, yet no
		// piece has been captured in this game (docs/rules.md, bikjang).
		name: "bikjang from a start already short of pieces has no effect", variant: Janggi,
		fen:   "4k4/9/9/9/5p3/9/9/9/9/3K1R3 w - - 0 40",
		moves: "d1e1 e10e9", wantEnded: false,
		wantPoints: [2]float64{13, 3.5},
	},
	{
		name: "bikjang from a start already short of pieces counts after a capture in the game", variant: Janggi,
		fen:   "4k4/9/9/9/5p3/9/9/9/9/3K1R3 w - - 0 40",
		moves: "d1e1 e10e9 f1f6", wantEnded: true, wantWinner: FirstWins, wantMethod: Bikjang,
		wantPoints: [2]float64{13, 1.5},
	},
	{
		name: "bikjang after a capture decided by points", variant: Janggi,
		fen:   "r8/4k4/p8/9/9/9/9/9/3K5/R7R w - - 0 1",
		moves: "a1a8 a10b10 d2e2 b10c10", wantEnded: true, wantWinner: FirstWins, wantMethod: Bikjang,
		wantPoints: [2]float64{26, 14.5},
	},
	{
		// Han is ahead on points, so the side that faced the generals loses.
		name: "bikjang won on points by the side that did not open the file", variant: Janggi,
		fen:   "rr7/4k4/p8/9/9/9/9/9/3K5/R8 w - - 0 1",
		moves: "a1a8 b10c10 d2e2 c10d10", wantEnded: true, wantWinner: SecondWins, wantMethod: Bikjang,
		wantPoints: [2]float64{13, 27.5},
	},
	{
		name: "bikjang broken by the next move", variant: Janggi,
		fen:   "r8/4k4/p8/9/9/9/9/9/3K5/R7R w - - 0 1",
		moves: "a1a8 a10b10 d2e2 e9d9", wantEnded: false,
		wantPoints: [2]float64{26, 14.5},
	},
	{
		name: "bikjang confirmed by a pass", variant: Janggi,
		fen:   "r8/4k4/p8/9/9/9/9/9/3K5/R7R w - - 0 1",
		moves: "a1a8 a10b10 d2e2 e9e9", wantEnded: true, wantWinner: FirstWins, wantMethod: Bikjang,
		wantPoints: [2]float64{26, 14.5},
	},
	{
		name: "janggi repetition decided by points", variant: Janggi,
		moves: repeatMoves("a1a2 a10a9 a2a1 a9a10", 2), wantEnded: true, wantWinner: SecondWins, wantMethod: Repetition,
		wantPoints: [2]float64{72, 73.5},
	},
	{
		name: "janggi repetition not yet at the second occurrence", variant: Janggi,
		moves: repeatMoves("a1a2 a10a9 a2a1 a9a10", 1) + " a1a2 a10a9 a2a1", wantEnded: false,
		wantPoints: [2]float64{72, 73.5},
	},
	{
		// Cho checks with every move of the cycle, Han never does.
		name: "janggi perpetual check loses", variant: Janggi,
		fen:   "5k3/9/R8/9/9/9/9/9/9/3K5 w - - 0 1",
		moves: "a8a10 f10f9 a10a9 f9f10 a9a10 f10f9 a10a9 f9f10 a9a10", wantEnded: true, wantWinner: SecondWins, wantMethod: PerpetualCheck,
		wantPoints: [2]float64{13, 1.5},
	},
	{
		name: "janggi perpetual check by han loses", variant: Janggi,
		fen:   "3k5/9/9/9/9/9/9/r8/9/5K3 b - - 0 1",
		moves: "a3a1 f1f2 a1a2 f2f1 a2a1 f1f2 a1a2 f2f1 a2a1", wantEnded: true, wantWinner: FirstWins, wantMethod: PerpetualCheck,
		wantPoints: [2]float64{0, 14.5},
	},
	{
		name: "two passes", variant: Janggi,
		moves: "e2e2 e9e9", wantEnded: true, wantWinner: SecondWins, wantMethod: TwoPasses,
		wantPoints: [2]float64{72, 73.5},
	},
	{
		name: "two passes not in a row", variant: Janggi,
		moves: "e2e2 a10a9 e2e2", wantEnded: false,
		wantPoints: [2]float64{72, 73.5},
	},
	{
		// The second pass also brings the start position back for the third
		// time; two passes come first in the order of the rules.
		name: "pass-pass that also repeats thrice is two_passes", variant: Janggi,
		moves: "a1a2 a10a9 a2a1 a9a10 e2e2 e9e9", wantEnded: true, wantWinner: SecondWins, wantMethod: TwoPasses,
		wantPoints: [2]float64{72, 73.5},
	},
	{
		name: "xiangqi perpetual check loses", variant: Xiangqi,
		fen:   "5k3/9/R8/9/9/9/9/9/9/3K5 w - - 0 1",
		moves: "a8a10 f10f9 a10a9 f9f10 a9a10 f10f9 a10a9 f9f10 a9a10", wantEnded: true, wantWinner: SecondWins, wantMethod: PerpetualCheck,
	},
	{
		name: "xiangqi perpetual check by black loses", variant: Xiangqi,
		fen:   "3k5/9/9/9/9/9/9/r8/9/5K3 b - - 0 1",
		moves: "a3a1 f1f2 a1a2 f2f1 a2a1 f1f2 a1a2 f2f1 a2a1", wantEnded: true, wantWinner: FirstWins, wantMethod: PerpetualCheck,
	},
	{
		// Red's chariot attacks the lone, unprotected black horse anew with
		// every move; Black only runs.
		name: "perpetual chase loses", variant: Xiangqi,
		fen:   "4k4/7R1/9/2n6/9/9/9/9/9/3K5 w - - 0 1",
		moves: repeatMoves("h9h7 c7b9 h7h9 b9c7", 2), wantEnded: true, wantWinner: SecondWins, wantMethod: PerpetualChase,
	},
	{
		name: "perpetual chase by black loses", variant: Xiangqi,
		fen:   "3k5/9/9/9/9/9/2N6/9/7r1/4K4 b - - 0 1",
		moves: repeatMoves("h2h4 c4b2 h4h2 b2c4", 2), wantEnded: true, wantWinner: FirstWins, wantMethod: PerpetualChase,
	},
	{
		// On c4 the chariot attacks the lone elephant on c10 and pins the
		// horse on d8 (the generals would face each other); back on d4 it
		// frees the horse, whose attack on c10 is then new. This was once
		// called a drawn repetition, the pinned horse taken to attack c10
		// all along.
		name: "unpinning a piece to attack is a chase", variant: Xiangqi,
		fen:   "c1bk5/9/3N5/9/9/9/3R5/9/3K5/9 w - - 0 1",
		moves: repeatMoves("d4c4 a10a9 c4d4 a9a10", 2), wantEnded: true, wantWinner: SecondWins, wantMethod: PerpetualChase,
	},
	{
		// Black checks every other move (a5-b3, b3-a5); Red's king steps
		// out to e2, which frees the horse on d8 to attack the unprotected
		// horse on e6, and back to d2, which opens the chariot on e1 onto
		// it: Red chases e6 on every move. The pinned horse was once taken,
		// in check, to have attacked e6 all along: a drawn repetition.
		name: "unpinning while stepping out of check is a chase", variant: Xiangqi,
		fen:   "c1bk5/9/3N5/9/4n4/n8/9/9/3K5/4R4 b - - 0 1",
		moves: repeatMoves("a5b3 d2e2 b3a5 e2d2", 2), wantEnded: true, wantWinner: SecondWins, wantMethod: PerpetualChase,
	},
	{
		// Black checks on every other move; Red's king steps out of each
		// check while its chariot keeps the horse in sight, which chases
		// nothing: only every other Red move chases, so it is a draw.
		name: "stepping out of check is no chase: repetition draws", variant: Xiangqi,
		fen:   "3k5/7R1/9/2n6/9/5r3/9/9/9/4K4 w - - 0 1",
		moves: repeatMoves("h9h7 f5e5 e1f1 c7b9 h7h9 e5f5 f1e1 b9c7", 2), wantEnded: true, wantWinner: Draw, wantMethod: Repetition,
	},
	{
		// The chariot on c10 guards c7, so only every other Red move chases.
		name: "chasing a protected piece is no chase: repetition draws", variant: Xiangqi,
		fen:   "2r1k4/7R1/9/2n6/9/9/9/9/9/3K5 w - - 0 1",
		moves: repeatMoves("h9h7 c7b9 h7h9 b9c7", 2), wantEnded: true, wantWinner: Draw, wantMethod: Repetition,
	},
	{
		// The horse answers each chase by attacking an unprotected red
		// piece (the cannon on d8, then the soldier on e6): both force.
		name: "mutual chase draws", variant: Xiangqi,
		fen:   "4k4/7R1/3C5/2n6/4P4/9/9/9/9/3K5 w - - 0 1",
		moves: repeatMoves("h9h7 c7b9 h7h9 b9c7", 2), wantEnded: true, wantWinner: Draw, wantMethod: Repetition,
	},
	{
		// Black's chariot blocks each check on f6, where it attacks the red
		// chariot on f1, and attacks it again from b6 on b1: the same piece
		// on every Black move. But every Red move forces too, one a check,
		// the other a chase of the cannon on b7, so Black does not lose.
		name: "a chase answered by a check and a chase draws", variant: Xiangqi,
		fen:   "5k3/9/9/1c7/1r7/9/9/8N/4K4/1R7 w - - 0 1",
		moves: repeatMoves("b1f1 b6f6 f1b1 f6b6", 2), wantEnded: true, wantWinner: Draw, wantMethod: Repetition,
	},
	{
		name: "unforced repetition draws", variant: Xiangqi,
		moves: repeatMoves("a1a2 a10a9 a2a1 a9a10", 2), wantEnded: true, wantWinner: Draw, wantMethod: Repetition,
	},
	{
		name: "insufficient material", variant: Xiangqi,
		fen:   "2bk5/9/9/9/9/9/9/9/4p4/4KA3 w - - 0 1",
		moves: "e1e2", wantEnded: true, wantWinner: Draw, wantMethod: InsufficientMaterial,
	},
	{
		name: "advisors and elephants alone at the start are insufficient", variant: Xiangqi,
		fen:       "2ba1k3/9/9/9/9/9/9/9/9/3AK1B2 w - - 0 1",
		wantEnded: true, wantWinner: Draw, wantMethod: InsufficientMaterial,
	},
	{
		name: "no legal move in the start position", variant: Xiangqi,
		fen:       "4k4/R8/9/9/9/5R3/9/9/9/3K5 b - - 0 1",
		wantEnded: true, wantWinner: FirstWins, wantMethod: Stalemate,
	},
	{
		// The FEN's counters say 119 plies without capture; only the game's
		// own plies count.
		name: "fen move counters are not used", variant: Xiangqi,
		fen:   "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR w - - 119 80",
		moves: "h3e3", wantEnded: false,
	},
	{
		// Janggi's twin: the counters say 198 plies played, two short of
		// the limit.
		name: "janggi fen move counters are not used", variant: Janggi,
		fen:   "rnba1abnr/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR w - - 199 100",
		moves: "a1a2 a10a9", wantEnded: false,
		wantPoints: [2]float64{72, 73.5},
	},
}

func TestGameEndings(t *testing.T) {
	for _, tt := range endingTests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGame(t, tt.variant, tt.fen)
			playMoves(t, g, tt.moves)
			got := g.Outcome()
			if got.Ended != tt.wantEnded || got.Winner != tt.wantWinner || got.Method != tt.wantMethod {
				t.Fatalf("after %v: outcome %+v, want ended=%v winner=%q method=%q", g.Moves(), got, tt.wantEnded, tt.wantWinner, tt.wantMethod)
			}
			if tt.variant == Janggi && got.Points != tt.wantPoints {
				t.Errorf("points %v, want %v", got.Points, tt.wantPoints)
			}
			if tt.variant == Xiangqi && got.Points != [2]float64{} {
				t.Errorf("xiangqi points %v, want zero", got.Points)
			}
		})
	}
}

func TestExternalEndings(t *testing.T) {
	tests := []struct {
		name       string
		variant    Variant
		act        func(g *Game) error
		wantErr    error
		wantWinner Winner
		wantMethod Method
	}{
		{"janggi resign", Janggi, func(g *Game) error { return g.Resign(First) }, nil, SecondWins, Resignation},
		{"xiangqi resign", Xiangqi, func(g *Game) error { return g.Resign(Second) }, nil, FirstWins, Resignation},
		{"janggi timeout", Janggi, func(g *Game) error { return g.Timeout(Second) }, nil, FirstWins, Timeout},
		{"xiangqi timeout", Xiangqi, func(g *Game) error { return g.Timeout(First) }, nil, SecondWins, Timeout},
		{"xiangqi agreement", Xiangqi, func(g *Game) error { return g.AgreeDraw() }, nil, Draw, Agreement},
		{"janggi has no agreement", Janggi, func(g *Game) error { return g.AgreeDraw() }, ErrNotAllowed, NoWinner, None},
		{"resign of no side", Xiangqi, func(g *Game) error { return g.Resign(Side(7)) }, ErrNotAllowed, NoWinner, None},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGame(t, tt.variant, "")
			playMoves(t, g, "a1a2")
			err := tt.act(g)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			got := g.Outcome()
			if got.Winner != tt.wantWinner || got.Method != tt.wantMethod || got.Ended != (tt.wantMethod != None) {
				t.Fatalf("outcome %+v, want %v by %v", got, tt.wantWinner, tt.wantMethod)
			}
			if tt.variant == Janggi && got.Points != [2]float64{72, 73.5} {
				t.Errorf("points %v, want [72 73.5]", got.Points)
			}
		})
	}
}

func TestMoveAfterTheEndRefused(t *testing.T) {
	tests := []struct {
		name    string
		variant Variant
		fen     string
		moves   string
		end     func(g *Game) error
	}{
		{"after checkmate", Xiangqi, "4k4/R8/9/9/9/9/9/9/1R7/3K5 w - - 0 1", "b2b10", nil},
		{"after two passes", Janggi, "", "e2e2 e9e9", nil},
		{"after resignation", Janggi, "", "", func(g *Game) error { return g.Resign(First) }},
		{"after timeout", Xiangqi, "", "h3e3", func(g *Game) error { return g.Timeout(Second) }},
		{"after agreement", Xiangqi, "", "", func(g *Game) error { return g.AgreeDraw() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGame(t, tt.variant, tt.fen)
			playMoves(t, g, tt.moves)
			if tt.end != nil {
				if err := tt.end(g); err != nil {
					t.Fatal(err)
				}
			}
			before := g.Outcome()
			plies := g.Plies()
			if len(g.LegalMoves()) != 0 {
				t.Errorf("LegalMoves after the end = %v, want none", g.LegalMoves())
			}
			// Even a move that is legal in the final position is refused.
			for _, m := range append(g.Position().LegalMoves(nil), mustMove(t, "a1a2")) {
				if _, err := g.Play(m); !errors.Is(err, ErrGameOver) {
					t.Errorf("Play(%v) error %v, want ErrGameOver", m, err)
				}
			}
			for name, f := range map[string]func() error{
				"Resign": func() error { return g.Resign(First) }, "Timeout": func() error { return g.Timeout(Second) }, "AgreeDraw": g.AgreeDraw,
			} {
				if err := f(); !errors.Is(err, ErrGameOver) {
					t.Errorf("%s after the end: error %v, want ErrGameOver", name, err)
				}
			}
			if g.Outcome() != before || g.Plies() != plies {
				t.Errorf("game changed after the end: %+v, %d plies", g.Outcome(), g.Plies())
			}
		})
	}
}

// The reason is CheckMove's; Play adds the ply. Exact texts are checked
// only where API.md fixes them.
func TestIllegalMoveNamesPly(t *testing.T) {
	tests := []struct {
		name    string
		variant Variant
		fen     string
		moves   string
		move    string
		wantErr string // "" for "ply N: " + CheckMove's text
	}{
		{"blocked chariot", Janggi, "", "a1a2 a10a9 a2a1 a9a10", "a1a5", "ply 5: move a1a5: the chariot's path is blocked at a4"},
		{"empty square", Xiangqi, "", "h3e3", "h3e3", "ply 2: move h3e3: there is no piece on h3"},
		{"moving the other side's piece", Xiangqi, "", "", "h10g8", ""},
		{"horse leg", Janggi, "", "", "b1d2", "ply 1: move b1d2: the horse is blocked at c1"},
		{"xiangqi pass", Xiangqi, "", "", "e1e1", ""},
		{"pass in check", Janggi, "4k4/9/9/9/9/9/9/9/9/3K1r3 w - - 0 1", "", "d1d1", ""},
		{"cannon over cannon", Janggi, "", "", "b3b10", ""},
		{"flying general", Xiangqi, "4k4/9/9/9/9/9/9/9/4A4/4K3R w - - 0 1", "", "e2d3", "ply 1: move e2d3: the generals would face each other on the e-file"},
		{"own piece", Janggi, "", "", "a1a4", ""},
		{"no move", Janggi, "", "", "", "ply 1: move 0000: not a move on the board"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGame(t, tt.variant, tt.fen)
			playMoves(t, g, tt.moves)
			m := NoMove
			if tt.move != "" {
				m = mustMove(t, tt.move)
			}
			p := g.Position()
			want := tt.wantErr
			if want == "" {
				want = fmt.Sprintf("ply %d: %v", g.Plies()+1, p.CheckMove(m))
			}
			_, err := g.Play(m)
			if !errors.Is(err, ErrIllegalMove) {
				t.Fatalf("Play(%v) error %v, want ErrIllegalMove", m, err)
			}
			if err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
			if g.Position().FEN() != p.FEN() || g.Plies() != len(strings.Fields(tt.moves)) {
				t.Errorf("game changed by an illegal move")
			}
		})
	}
}

func TestGameAccessors(t *testing.T) {
	g := mustGame(t, Xiangqi, "")
	if g.Start() != StartFEN(Xiangqi) || g.Variant() != Xiangqi {
		t.Fatalf("Start() = %q, Variant() = %v", g.Start(), g.Variant())
	}
	infos := playMoves(t, g, "h3e3 h10g8 e3e7")
	want := []MoveInfo{
		{Ply: 1, Move: mustMove(t, "h3e3"), Side: First, Notation: "C2.5"},
		{Ply: 2, Move: mustMove(t, "h10g8"), Side: Second, Notation: "H8+7"},
		{Ply: 3, Move: mustMove(t, "e3e7"), Side: First, Captured: MakePiece(Second, Soldier), Notation: "C5+4"},
	}
	for i := range want {
		if infos[i] != want[i] {
			t.Errorf("ply %d: %+v, want %+v", i+1, infos[i], want[i])
		}
	}
	if g.Plies() != 3 || len(g.Moves()) != 3 {
		t.Fatalf("Plies() = %d, Moves() = %v", g.Plies(), g.Moves())
	}
	// Copies handed out must not alias the game.
	g.Moves()[0] = NoMove
	g.Position().Make(mustMove(t, "e10e9"))
	if g.Moves()[0] != mustMove(t, "h3e3") || g.Position().Turn() != Second {
		t.Fatal("changing Moves() or Position() changed the game")
	}
	c := g.Clone()
	playMoves(t, c, "e10e9")
	if g.Plies() != 3 || c.Plies() != 4 || g.Position().FEN() == c.Position().FEN() {
		t.Fatal("a clone shares state with its original")
	}
	j := mustGame(t, Janggi, "")
	infos = playMoves(t, j, "e2e2")
	if !infos[0].Pass || infos[0].Notation != JanggiPass || j.Outcome().Points != [2]float64{72, 73.5} {
		t.Errorf("janggi pass: %+v, outcome %+v", infos[0], j.Outcome())
	}
	if _, err := NewGame(Janggi, "not a fen"); !errors.Is(err, ErrBadFEN) {
		t.Errorf("NewGame with a bad FEN: %v, want ErrBadFEN", err)
	}
}

// Whole games from the standard start positions, one per ending that the
// rules reach from a move (found by seeded random play and checked by hand).
// The long move-limit games are played in game_random_test.go.
var fullGames = []struct {
	name       string
	variant    Variant
	moves      string
	wantWinner Winner
	wantMethod Method
}{
	{"janggi checkmate", Janggi, "e2d2 a10a9 d2d2 a9d9 d2e2 d9d2 e2f3 d2d3 b3e3 d3f1", SecondWins, Checkmate},
	// Han's e9f8 faces the generals on the f-file, Cho's a1a7 keeps them
	// facing and is the first capture.
	{"janggi bikjang", Janggi, "e2f2 c7c6 a4b4 e9f8 a1a7", FirstWins, Bikjang},
	{"janggi repetition", Janggi, repeatMoves("i1i2 e9d9 i2i1 d9e9", 2), SecondWins, Repetition},
	{"janggi perpetual check", Janggi, "e2f3 e7d7 h3e3 d7e7 e3e5 e7d7 e5e3 d7e7 e3e6 e7d7 e6e3", SecondWins, PerpetualCheck},
	{"janggi two passes", Janggi, "e2e2 e9e9", SecondWins, TwoPasses},
	{"xiangqi checkmate", Xiangqi, "b3b6 f10e9 h3h10 i10h10 b6c6 h8h2 c6c10", FirstWins, Checkmate},
	{"xiangqi stalemate", Xiangqi, "h3h6 b8b1 a1b1 h8h1 i1h1 h10g8 b1a1 a10a8 h6c6 c7c6 b3i3 c6c5 i3i7 g8i7 c4c5 e7e6 h1h9 i7h9 a1a3 a8i8 a3b3 i8i4 b3b10 i4g4 b10c10 g4g1 c10d10 e10d10 e4e5 g1f1 e1f1 e6e5 d1e2 g10e8 c1e3 i10i9 c5c6 e8c6 e3c1 i9i8 a4a5 i8i9 c1e3 e5e4 a5a6 e4e3 a6a7 e3e2 a7a8 c6a8", SecondWins, Stalemate},
	{"xiangqi repetition", Xiangqi, repeatMoves("b1c3 a10a9 c3b1 a9a10", 2), Draw, Repetition},
	{"xiangqi perpetual check", Xiangqi, "b3b10 b8b9 h3h10 b9b8 b10d10 b8b9 d10a10 e10e9 a10a9 e9e10 a9a10 e10e9 a10a9 e9e10 a9a10", SecondWins, PerpetualCheck},
	// Red's elephant shuttles e3-g5: on g5 it screens the h5 cannon onto the
	// black cannon on c5, on e3 it attacks c5 itself, which nothing guards.
	{"xiangqi perpetual chase", Xiangqi, "e1e2 b8b5 h3h5 b5c5 b3h3 c5g5 g1i3 g5c5 i3g5 g7g6 g5e3 h8h9 e3g5 h9h8 g5e3 h8h9 e3g5 h9h8", SecondWins, PerpetualChase},
	{"xiangqi insufficient material", Xiangqi, "b3b10 h8h1 i1h1 a10b10 g1i3 b10a10 g4g5 b8a8 c4c5 a8b8 c5c6 c7c6 h3g3 b8b10 h1h10 i10h10 g3g7 h10i10 g7a7 a10a7 i4i5 a7a4 a1a4 e7e6 a4a7 f10e9 a7i7 i10i7 e4e5 i7i5 e5e6 i5g5 i3g5 b10b2 e6e7 b2b8 e1e2 b8e8 e7e8 g10e8 e2e1 c10a8 d1e2 e9f8 e2d1 e10e9 d1e2 e9e10 c1a3 f8e9 g5e3 e9f10 b1d2 f10e9 d2e4 e8g6 e4c5 c6c5 e3c5", Draw, InsufficientMaterial},
}

func TestFullGames(t *testing.T) {
	for _, tt := range fullGames {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGame(t, tt.variant, "")
			moves := strings.Fields(tt.moves)
			playMoves(t, g, strings.Join(moves[:len(moves)-1], " "))
			if g.Outcome().Ended {
				t.Fatalf("ended early: %+v", g.Outcome())
			}
			playMoves(t, g, moves[len(moves)-1])
			if o := g.Outcome(); !o.Ended || o.Winner != tt.wantWinner || o.Method != tt.wantMethod {
				t.Fatalf("outcome %+v, want %v by %v", o, tt.wantWinner, tt.wantMethod)
			}
		})
	}
}

// BenchmarkGamePlay measures Play, adjudication and notation included, over
// the 200 plies of a Janggi game without captures.
func BenchmarkGamePlay(b *testing.B) {
	g := mustGame(b, Janggi, "")
	walkUntilEnd(b, g, rand.New(rand.NewPCG(1, 2)), 200, func(after *Game, info MoveInfo) bool {
		o := after.Outcome()
		return info.Captured == NoPiece && (!o.Ended || o.Method == MoveLimit)
	})
	moves := g.Moves()
	b.ReportAllocs()
	for b.Loop() {
		r := mustGame(b, Janggi, "")
		for _, m := range moves {
			if _, err := r.Play(m); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(moves)), "ns/ply")
}

// Cycles in which both players give check with every move: neither checks
// perpetually while the other does not, so docs/rules.md's exception does
// not apply and the repetition ends the game as an unforced one would.
func TestMutualPerpetualCheck(t *testing.T) {
	tests := []struct {
		name       string
		variant    Variant
		fen        string
		cycle      string
		wantWinner Winner
		wantPoints [2]float64
	}{
		{
			// Cho's general steps off the file of a Cho chariot behind it,
			// which then checks along that file; Han's general steps out of
			// that check onto the file of Cho's general, where it screens a
			// Han cannon behind it onto Cho's general.
			name: "janggi is decided by points", variant: Janggi,
			fen:   "3cc4/4k4/9/9/9/9/9/9/4K4/3RR4 w - - 0 1",
			cycle: "e2d2 e9d9 d2e2 d9e9", wantWinner: FirstWins, wantPoints: [2]float64{26, 15.5},
		},
		{
			// The red horse and the black cannon shuttle between two files.
			// On f6 the horse screens the black cannon on f7 onto f2, on d5
			// the red cannon on d3 onto d8. The black cannon blocks that on
			// d7 (a second screen), and is the only screen once the horse
			// has left d5; leaving f7 it opens its chariot's file onto f2.
			name: "xiangqi draws", variant: Xiangqi,
			fen:   "9/9/3k1r3/5c3/5H3/9/9/3C5/5K3/9 w - - 0 1",
			cycle: "f6d5 f7d7 d5f6 d7f7", wantWinner: Draw,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGame(t, tt.variant, tt.fen)
			if !g.Position().InCheck() {
				t.Fatal("the cycle's first position must be check, as the cycle's last move gives it")
			}
			for _, info := range playMoves(t, g, repeatMoves(tt.cycle, 2)) {
				if !info.Check {
					t.Fatalf("ply %d (%v) gives no check", info.Ply, info.Move)
				}
			}
			want := Outcome{Ended: true, Winner: tt.wantWinner, Method: Repetition, Points: tt.wantPoints}
			if got := g.Outcome(); got != want || g.Plies() != 8 {
				t.Fatalf("after %d plies: %+v, want %+v after 8", g.Plies(), got, want)
			}
		})
	}
}

// loopMoves returns the moves of a piece that goes round squares (each in
// line with the next, the last with the first) for n moves from squares[0].
func loopMoves(squares []string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = squares[i%len(squares)] + squares[(i+1)%len(squares)]
	}
	return out
}

// alternate interleaves the first player's moves with the second's.
func alternate(first, second []string) string {
	var b strings.Builder
	for i := range first {
		fmt.Fprintf(&b, "%s %s ", first[i], second[i])
	}
	return strings.TrimSpace(b.String())
}

// When several endings hold after the same ply, the first in docs/rules.md
// "Order and counting" names the method. Each case checks that the others
// do hold after its last ply, and that nothing ended the game before it.
func TestEndingsThatHoldTogether(t *testing.T) {
	tests := []struct {
		name    string
		variant Variant
		fen     string
		moves   string
		also    func(g *Game) bool // the ending that gives way holds too
		want    Outcome
	}{
		{
			// Han's soldier leaves the d-file and the generals face; Cho's
			// i5i10, after the capture on i5, keeps them facing and mates.
			// Han has more points, so bikjang would make Han the winner.
			name: "janggi checkmate that also confirms bikjang", variant: Janggi,
			fen:   "3k5/R8/9/9/9/3p4p/9/rr7/9/3K4R w - - 0 1",
			moves: "i1i5 d5c5 i5i10",
			also: func(g *Game) bool {
				n := len(g.plies)
				return g.plies[n-1].facing && g.plies[n-2].facing && g.caps > 0
			},
			want: Outcome{Ended: true, Winner: FirstWins, Method: Checkmate, Points: [2]float64{26, 29.5}},
		},
		{
			// The generals step between the d- and e-files and never face
			// after two plies in a row until Cho's pass on ply 15 keeps
			// them facing after Han's d10e10. That pass also brings Cho e1,
			// Han e10, Han to move, for the third time (plies 7, 11, 15).
			// The passes on plies 6 and 13, where the generals do not face,
			// change whose turn it is in the cycle, so that this position
			// can come back with a facing one before it.
			name: "janggi bikjang on a third repetition", variant: Janggi,
			fen:   "4k4/9/9/9/9/p8/9/9/9/R2K5 w - - 0 1",
			moves: "a1a5 e10d10 d1e1 d10e10 e1d1 e10e10 d1e1 e10d10 e1d1 d10e10 d1e1 e10d10 e1e1 d10e10 e1e1",
			also:  func(g *Game) bool { return g.firstOfThree() >= 0 },
			want:  Outcome{Ended: true, Winner: FirstWins, Method: Bikjang, Points: [2]float64{13, 1.5}},
		},
		{
			// Cho's chariot goes round 25 squares and Han's between 2, so
			// every position comes back after 100 plies, and the start
			// position is the first to occur a third time, on ply 200.
			name: "janggi third repetition on ply 200", variant: Janggi,
			fen: "5k2r/9/9/9/9/9/9/R8/4K4/9 w - - 0 1",
			moves: alternate(
				loopMoves([]string{
					"a3", "b3", "c3", "d3", "e3", "e4", "d4", "c4", "b4", "b5", "c5", "d5", "e5",
					"e6", "d6", "c6", "b6", "b7", "c7", "d7", "e7", "a7", "a6", "a5", "a4",
				}, 100),
				loopMoves([]string{"i10", "i9"}, 100)),
			also: func(g *Game) bool { return g.Plies() == janggiMaxPlies },
			want: Outcome{Ended: true, Winner: SecondWins, Method: Repetition, Points: [2]float64{13, 14.5}},
		},
		{
			// Red's chariot goes round 5 squares and Black's round 6, so
			// every position comes back after 60 plies, and the start
			// position is the first to occur a third time, on ply 120.
			name: "xiangqi third repetition on the 120th ply without capture", variant: Xiangqi,
			fen: "5k3/9/6r2/9/9/9/R8/9/9/3K5 w - - 0 1",
			moves: alternate(
				loopMoves([]string{"a4", "b4", "c4", "d4", "e4"}, 60),
				loopMoves([]string{"g8", "h8", "i8", "i7", "h7", "g7"}, 60)),
			also: func(g *Game) bool { return g.Plies()-g.lastCap == xiangqiNoCapturePlies },
			want: Outcome{Ended: true, Winner: Draw, Method: Repetition},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGame(t, tt.variant, tt.fen)
			moves := strings.Fields(tt.moves)
			playMoves(t, g, strings.Join(moves[:len(moves)-1], " "))
			if o := g.Outcome(); o.Ended {
				t.Fatalf("ended after %d plies, before the last: %+v", g.Plies(), o)
			}
			playMoves(t, g, moves[len(moves)-1])
			if !tt.also(g) {
				t.Fatalf("after %v the ending that gives way does not hold", g.Moves())
			}
			if got := g.Outcome(); got != tt.want {
				t.Fatalf("after %d plies: %+v, want %+v", g.Plies(), got, tt.want)
			}
		})
	}
}
