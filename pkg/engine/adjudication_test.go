package engine

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/palacehq/palace/pkg/rules"
)

// replay replays moves from fen through rules.Game, failing the test if
// any is illegal or the game ends early.
func replay(t *testing.T, v rules.Variant, fen string, moves []rules.Move) *rules.Game {
	t.Helper()
	g, err := rules.NewGame(v, fen)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range moves {
		if _, err := g.Play(m); err != nil {
			t.Fatal(err)
		}
		if g.Outcome().Ended {
			t.Fatalf("history ended the game after %v: %v", m, g.Outcome())
		}
	}
	return g
}

func TestAdjudicationInSearch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		variant rules.Variant
		fen     string
		history []string
		depth   int
		// wantMove, if set, is the only acceptable move; avoid lists moves
		// that must not be played.
		wantMove string
		avoid    []string
		wantMate int // 0: do not check
		// After the engine's move, rules.Game must have ended with
		// wantWinner if wantEnd; otherwise it must not have ended with a
		// loss for the engine.
		wantEnd    bool
		wantWinner rules.Winner
	}{
		{
			// Red has checked with every move since the first time the
			// chariot reached a10; a9a10 would make that position's third
			// occurrence, and the perpetual checker loses.
			name:    "xiangqi avoids completing a perpetual check",
			variant: rules.Xiangqi,
			fen:     "4k4/9/9/9/9/9/9/9/9/R2K5 w - - 0 1",
			history: []string{"a1a10", "e10e9", "a10a9", "e9e10", "a9a10", "e10e9", "a10a9", "e9e10"},
			depth:   4,
			avoid:   []string{"a9a10"},
		},
		{
			// Red's chariot has chased the unprotected black cannon on
			// every move of the cycle: c7b7 would make the position's
			// third occurrence, and the chaser loses.
			name:    "xiangqi avoids completing a perpetual chase",
			variant: rules.Xiangqi,
			fen:     "2bakab1r/8r/1c7/1R7/9/9/9/9/9/3K5 b - - 0 1",
			history: []string{"b8c8", "b7c7", "c8b8", "c7b7", "b8c8", "b7c7", "c8b8"},
			depth:   4,
			avoid:   []string{"c7b7"},
		},
		{
			// The other way round: Black's cannon move makes the third
			// occurrence of a cycle in which Red chased it on every move,
			// and wins at once.
			name:     "xiangqi completes the opponent's perpetual chase",
			variant:  rules.Xiangqi,
			fen:      "5k3/9/2c6/1R7/9/9/9/9/9/4K4 w - - 0 1",
			history:  []string{"b7c7", "c8b8", "c7b7", "b8c8", "b7c7", "c8b8", "c7b7"},
			depth:    3,
			wantMove: "b8c8",
			wantMate: 1,
			wantEnd:  true, wantWinner: rules.SecondWins,
		},
		{
			name:    "janggi avoids completing a perpetual check",
			variant: rules.Janggi,
			fen:     "4k4/9/9/9/9/9/9/9/9/R2K5 w - - 0 1",
			history: []string{"a1a10", "e10e9", "a10a9", "e9e10", "a9a10", "e10e9", "a10a9", "e9e10"},
			depth:   4,
			avoid:   []string{"a9a10"},
		},
		{
			// Han passed; Cho leads 13 to 7.5, so passing ends the game
			// on points in Cho's favour.
			name:     "janggi passes back when ahead on points",
			variant:  rules.Janggi,
			fen:      "3a1a3/4k4/9/9/9/9/9/9/9/R2K5 b - - 0 1",
			history:  []string{"e9e9"},
			depth:    4,
			wantMove: "d1d1",
			wantMate: 1,
			wantEnd:  true, wantWinner: rules.FirstWins,
		},
		{
			// Same, but Han has a chariot more: a pass would lose.
			name:    "janggi does not pass back when behind on points",
			variant: rules.Janggi,
			fen:     "3a1a3/4k4/8r/9/9/9/9/9/9/R2K5 b - - 0 1",
			history: []string{"e9e9"},
			depth:   4,
			avoid:   []string{"d1d1"},
		},
		{
			// A piece has been taken and Han's general just stepped onto
			// Cho's file: any Cho move that leaves them facing ends the
			// game by bikjang, which Cho wins on points.
			name:     "janggi bikjang when ahead on points",
			variant:  rules.Janggi,
			fen:      "3a1a3/3k5/9/9/9/9/9/9/4K4/Rp7 w - - 0 1",
			history:  []string{"a1b1", "d9e9"},
			depth:    3,
			wantMate: 1,
			wantEnd:  true, wantWinner: rules.FirstWins,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			history := mustMoves(t, tc.history...)
			g := replay(t, tc.variant, tc.fen, history)
			res, err := New(Options{HashMB: 2}).SearchGame(context.Background(), g, Limits{Depth: tc.depth}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantMove != "" && res.Move.String() != tc.wantMove {
				t.Errorf("move %v (score %d, pv %v), want %s", res.Move, res.Score, res.PV, tc.wantMove)
			}
			for _, a := range tc.avoid {
				if res.Move.String() == a {
					t.Errorf("played %s (score %d)", a, res.Score)
				}
			}
			if tc.wantMate != 0 && res.Mate != tc.wantMate {
				t.Errorf("Mate = %d (score %d, pv %v), want %d", res.Mate, res.Score, res.PV, tc.wantMate)
			}
			if _, err := g.Play(res.Move); err != nil {
				t.Fatal(err)
			}
			o := g.Outcome()
			lost := rules.SecondWins
			if g.Position().Turn() == rules.First { // the engine was Second
				lost = rules.FirstWins
			}
			switch {
			case tc.wantEnd && (!o.Ended || o.Winner != tc.wantWinner):
				t.Errorf("after %v: outcome %v, want %v", res.Move, o, tc.wantWinner)
			case !tc.wantEnd && o.Ended && o.Winner == lost:
				t.Errorf("after %v: the engine lost: %v", res.Move, o)
			}
		})
	}
}

// searchAtPly searches fen as if plies plies without a capture had been
// played before it (filler positions that never repeat), to reach the ply
// limits without playing a whole game.
func searchAtPly(t *testing.T, v rules.Variant, fen string, plies int, lim Limits) Result {
	t.Helper()
	e := New(Options{HashMB: 1})
	s := newSearcher()
	if err := s.setup(mustFEN(t, v, fen), nil); err != nil {
		t.Fatal(err)
	}
	root := s.st[0]
	s.st = s.st[:0]
	for i := 0; i < plies; i++ {
		s.st = append(s.st, state{hash: uint64(i)*0x9e3779b97f4a7c15 + 12345})
	}
	s.st = append(s.st, root)
	s.root = plies
	s.tt, s.stop = e.tt, new(atomic.Bool)
	res, err := s.run(lim, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestPlyLimits(t *testing.T) {
	// Red is a chariot up, but the 120th ply without a capture draws,
	// whatever Red plays (no capture or mate is available).
	xq := "4k4/9/9/9/9/9/9/9/9/R2K5 w - - 0 1"
	if res := searchAtPly(t, rules.Xiangqi, xq, 119, Limits{Depth: 3}); res.Score != 0 {
		t.Errorf("xiangqi at ply 119: score %d, want 0 (draw at 120)", res.Score)
	}
	if res := searchAtPly(t, rules.Xiangqi, xq, 100, Limits{Depth: 3}); res.Score < 300 {
		t.Errorf("xiangqi at ply 100: score %d, want Red clearly better", res.Score)
	}
	// Janggi: the 200th ply ends the game on points, won by Cho (13 to
	// 7.5) whatever it plays; Han to move at ply 199 loses likewise.
	jg := "3a1a3/4k4/9/9/9/9/9/9/9/R2K5 w - - 0 1"
	if res := searchAtPly(t, rules.Janggi, jg, 199, Limits{Depth: 3}); res.Mate != 1 {
		t.Errorf("janggi Cho at ply 199: Mate %d (score %d), want 1", res.Mate, res.Score)
	}
	jgHan := "3a1a3/4k4/9/9/9/9/9/9/9/R2K5 b - - 0 1"
	if res := searchAtPly(t, rules.Janggi, jgHan, 199, Limits{Depth: 3}); res.Mate != -1 {
		t.Errorf("janggi Han at ply 199: Mate %d (score %d), want -1", res.Mate, res.Score)
	}
}
