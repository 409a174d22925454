package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/rules"
)

// Positions found by a random generator and confirmed by the brute-force
// solver in helpers_test.go (which the test runs again). In the Janggi ones
// Han starts ahead on points (the soldiers on a1 and i1), and the solver
// checks that the win is as fast when endings on points never help Cho:
// so the fastest win is a checkmate, after exactly 2N-1 plies.
var mateCases = []struct {
	name    string
	variant rules.Variant
	fen     string
	wantN   int // moves of the side to move, the mating one included
}{
	{"xiangqi mate in 1 chariot", rules.Xiangqi, "3k5/7P1/1R6P/9/9/9/9/9/9/4K4 w - - 0 1", 1},
	{"xiangqi mate in 1 cannon", rules.Xiangqi, "2b3b2/9/4Ck3/9/9/9/9/4K2R1/9/9 w - - 0 1", 1},
	{"xiangqi mate in 2 horse and cannon", rules.Xiangqi, "2ba5/9/3k4b/9/9/9/4N4/4K4/1C7/9 w - - 0 1", 2},
	{"xiangqi mate in 2 two cannons", rules.Xiangqi, "9/3k5/3a4P/4C4/2b6/5C3/9/9/9/4K4 w - - 0 1", 2},
	{"xiangqi mate in 3 chariot and cannon", rules.Xiangqi, "3ak4/4a4/9/9/2R6/9/9/3K5/9/6C2 w - - 0 1", 3},
	{"xiangqi mate in 3 two chariots", rules.Xiangqi, "9/4k4/3a2R1b/4C4/9/9/9/5K3/1R7/9 w - - 0 1", 3},
	{"janggi mate in 1 two horses", rules.Janggi, "5N1b1/4a4/3k5/4N4/9/9/9/4K4/9/p7p w - - 0 1", 1},
	{"janggi mate in 1 cannon", rules.Janggi, "b2k2C1b/5P3/3P1a3/9/9/9/9/9/3K5/p7p w - - 0 1", 1},
	{"janggi mate in 2 horse and soldier", rules.Janggi, "bb2k2N1/3P5/9/9/9/9/9/9/9/p2K4p w - - 0 1", 2},
	{"janggi mate in 2 chariot", rules.Janggi, "b2aak2b/9/4P4/9/8P/4R4/9/9/9/p4K2p w - - 0 1", 2},
	{"janggi mate in 3 chariot and soldier", rules.Janggi, "R2a3bb/4Pa3/3k5/9/9/9/9/5K3/9/p7p w - - 0 1", 3},
	{"janggi mate in 3 horse and soldier", rules.Janggi, "1b1k4b/2Pa5/9/4N4/9/9/9/9/9/p4K2p w - - 0 1", 3},
}

func TestFindsMates(t *testing.T) {
	for _, tc := range mateCases {
		t.Run(tc.name, func(t *testing.T) {
			p := mustFEN(t, tc.variant, tc.fen)
			if tc.variant == rules.Janggi && p.Points(rules.First) >= p.Points(rules.Second) {
				t.Fatalf("Cho must be behind on points so that only mate wins")
			}
			if got := exactMateIn(p, tc.wantN, false); got != tc.wantN {
				t.Fatalf("brute force: forced win in %d, want exactly %d", got, tc.wantN)
			}
			if got := exactMateIn(p, tc.wantN, true); got != tc.wantN {
				t.Fatalf("brute force: forced mate in %d, want exactly %d", got, tc.wantN)
			}
			for _, lvl := range []struct {
				name string
				lim  Limits
			}{
				{"depth", Limits{Depth: 2*tc.wantN + 2}},
				{"level10", Level(10).Limits(1)},
			} {
				e := New(Options{HashMB: 4})
				res, err := e.Search(context.Background(), p, nil, lvl.lim, nil)
				if err != nil {
					t.Fatal(err)
				}
				if want := 2*tc.wantN - 1; res.Mate != want {
					t.Errorf("%s: Mate = %d (score %d, pv %v), want %d", lvl.name, res.Mate, res.Score, res.PV, want)
				}
				if !moveMatesIn(p, res.Move, tc.wantN) {
					t.Errorf("%s: %v does not force mate in %d (pv %v)", lvl.name, res.Move, tc.wantN, res.PV)
				}
			}
		})
	}
}

func TestNoLegalMove(t *testing.T) {
	for _, tc := range []struct {
		name    string
		variant rules.Variant
		fen     string
	}{
		{"xiangqi checkmated", rules.Xiangqi, "3k5/7P1/3R4P/9/9/9/9/9/9/4K4 b - - 1 1"},
		{"xiangqi stalemated", rules.Xiangqi, "3k5/1R5P1/8P/9/9/9/9/9/9/4K4 b - - 1 1"},
		{"janggi checkmated", rules.Janggi, "1b2a2b1/9/4kR3/5P3/9/9/9/5K3/9/p7p b - - 0 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustFEN(t, tc.variant, tc.fen)
			if n := len(p.LegalMoves(nil)); n != 0 {
				t.Fatalf("test position has %d legal moves", n)
			}
			res, err := New(Options{HashMB: 1}).Search(context.Background(), p, nil, Limits{Depth: 3}, nil)
			if !errors.Is(err, ErrNoLegalMove) || res.Move != rules.NoMove {
				t.Fatalf("got %v, %v; want NoMove, ErrNoLegalMove", res.Move, err)
			}
		})
	}
}

// randomGame plays n random legal plies (no passes) from the start.
func randomGame(t testing.TB, v rules.Variant, rng *rand.Rand, n int) *rules.Game {
	g, err := rules.NewGame(v, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n && !g.Outcome().Ended; i++ {
		moves := slices.DeleteFunc(g.LegalMoves(), rules.Move.IsPass)
		if len(moves) == 0 {
			break
		}
		if _, err := g.Play(moves[rng.IntN(len(moves))]); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

func TestAlwaysLegal(t *testing.T) {
	games := 12
	if testing.Short() {
		games = 5
	}
	for _, v := range []rules.Variant{rules.Xiangqi, rules.Janggi} {
		t.Run(v.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(v)))
			e := New(Options{HashMB: 2})
			for i := 0; i < games; i++ {
				g := randomGame(t, v, rng, rng.IntN(120))
				if g.Outcome().Ended {
					continue
				}
				for _, lim := range []Limits{{Nodes: 800}, {Depth: 2}, {Depth: 3, Noise: 100, Seed: uint64(i)}} {
					res, err := e.SearchGame(context.Background(), g, lim, nil)
					if err != nil {
						t.Fatalf("game %d: %v", i, err)
					}
					if !slices.Contains(g.LegalMoves(), res.Move) {
						t.Fatalf("game %d (%s, moves %v): illegal move %v", i, g.Start(), g.Moves(), res.Move)
					}
					for j, m := range res.PV {
						if j == 0 && m != res.Move {
							t.Fatalf("PV %v does not start with the move %v", res.PV, res.Move)
						}
					}
				}
			}
		})
	}
}

func TestPVIsLegal(t *testing.T) {
	for _, v := range []rules.Variant{rules.Xiangqi, rules.Janggi} {
		p := mustFEN(t, v, rules.StartFEN(v))
		res, err := New(Options{HashMB: 4}).Search(context.Background(), p, nil, Limits{Depth: 5}, nil)
		if err != nil {
			t.Fatal(err)
		}
		q := p.Clone()
		for _, m := range res.PV {
			if err := q.CheckMove(m); err != nil {
				t.Fatalf("%v: PV %v: %v", v, res.PV, err)
			}
			q.Make(m)
		}
	}
}

func TestReproducible(t *testing.T) {
	for _, v := range []rules.Variant{rules.Xiangqi, rules.Janggi} {
		for _, lim := range []Limits{{Nodes: 20_000}, {Depth: 3, Noise: 80, Seed: 5}} {
			rng := rand.New(rand.NewPCG(3, 3))
			g := randomGame(t, v, rng, 10)
			var first Result
			for run := 0; run < 3; run++ {
				e := New(Options{HashMB: 2, Seed: 42})
				res, err := e.SearchGame(context.Background(), g, lim, nil)
				if err != nil {
					t.Fatal(err)
				}
				res.Time = 0
				if run == 0 {
					first = res
					continue
				}
				if res.Move != first.Move || res.Score != first.Score || res.Nodes != first.Nodes || !slices.Equal(res.PV, first.PV) {
					t.Fatalf("%v %+v: run %d gave %+v, run 0 gave %+v", v, lim, run, res, first)
				}
			}
		}
	}
}

func TestStop(t *testing.T) {
	for _, v := range []rules.Variant{rules.Xiangqi, rules.Janggi} {
		e := New(Options{HashMB: 4})
		p := mustFEN(t, v, rules.StartFEN(v))
		done := make(chan Result)
		go func() {
			res, err := e.Search(context.Background(), p, nil, Limits{Infinite: true}, nil)
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		time.Sleep(100 * time.Millisecond)
		e.Stop()
		select {
		case res := <-done:
			if !slices.Contains(p.LegalMoves(nil), res.Move) {
				t.Fatalf("%v: illegal move %v after Stop", v, res.Move)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%v: Search did not return after Stop", v)
		}

		// A cancelled context stops the search too.
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			time.Sleep(50 * time.Millisecond)
			cancel()
		}()
		// The search runs aside so that one deaf to its context fails here,
		// not at go test's timeout minutes later.
		cancelled := make(chan error, 1)
		go func() {
			res, err := e.Search(ctx, p, nil, Limits{Infinite: true}, nil)
			if err == nil && !slices.Contains(p.LegalMoves(nil), res.Move) {
				err = fmt.Errorf("illegal move %v", res.Move)
			}
			cancelled <- err
		}()
		select {
		case err := <-cancelled:
			if err != nil {
				t.Fatalf("%v: after cancel: %v", v, err)
			}
		case <-time.After(10 * time.Second):
			e.Stop()
			t.Fatalf("%v: Search did not return after its context was cancelled", v)
		}
	}
}

func TestTimeLimit(t *testing.T) {
	for _, lim := range []Limits{
		{MoveTime: 200 * time.Millisecond},
		{Time: [2]time.Duration{2 * time.Second, 2 * time.Second}},
	} {
		p := mustFEN(t, rules.Xiangqi, rules.StartFEN(rules.Xiangqi))
		start := time.Now()
		res, err := New(Options{HashMB: 4}).Search(context.Background(), p, nil, lim, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Generous: only a search that ignores its clock fails.
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("%+v: took %v", lim, el)
		}
		if res.Depth < 1 {
			t.Fatalf("%+v: no iteration completed", lim)
		}
	}
}

func TestSingleLegalMove(t *testing.T) {
	// The Xiangqi general in check has one way out: the block on e4.
	p := mustFEN(t, rules.Xiangqi, "3k5/9/9/9/9/4r4/R8/2n3n2/9/4K4 w - - 0 1")
	legal := p.LegalMoves(nil)
	if len(legal) != 1 {
		t.Fatalf("test position has %d legal moves: %v", len(legal), legal)
	}
	res, err := New(Options{HashMB: 1}).Search(context.Background(), p, nil, Limits{MoveTime: time.Minute}, nil)
	if err != nil || res.Move != legal[0] {
		t.Fatalf("got %v, %v; want %v", res.Move, err, legal[0])
	}
	if res.Time > 10*time.Second {
		t.Fatalf("forced move took %v", res.Time)
	}
	// One ply scores it: a forced move is played at once, not searched
	// for the whole budget on the clock.
	if res.Depth != 1 {
		t.Fatalf("forced move searched to depth %d (%d nodes, %v), want 1", res.Depth, res.Nodes, res.Time)
	}
}

func TestIllegalHistory(t *testing.T) {
	p := mustFEN(t, rules.Xiangqi, rules.StartFEN(rules.Xiangqi))
	_, err := New(Options{HashMB: 1}).Search(context.Background(), p, mustMoves(t, "h3e3", "h3e3"), Limits{Depth: 1}, nil)
	if !errors.Is(err, rules.ErrIllegalMove) {
		t.Fatalf("err = %v, want ErrIllegalMove", err)
	}
}

// TestNodeLimit: a search given only a node budget ends within it, as "go
// nodes" promises, however deep it got (the levels' budgets, with noise,
// are checked in TestALevelKeepsItsNodeBudgetAfterItsFirstIteration).
func TestNodeLimit(t *testing.T) {
	for _, v := range []rules.Variant{rules.Janggi, rules.Xiangqi} {
		const budget = 5000
		res, err := New(Options{HashMB: 4}).Search(context.Background(), mustFEN(t, v, rules.StartFEN(v)), nil, Limits{Nodes: budget}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Nodes > budget {
			t.Errorf("%v: searched %d nodes, budget %d", v, res.Nodes, budget)
		}
	}
}

// TestClockBudgetKeepsHalfTheTimeLeft: given a clock, a search never
// plans to use more than half the time left, even with one move to the
// next control, or a "go wtime" with little time flags.
func TestClockBudgetKeepsHalfTheTimeLeft(t *testing.T) {
	for _, lim := range []Limits{
		{Time: [2]time.Duration{time.Second, time.Second}, MovesToGo: 1},
		{Time: [2]time.Duration{time.Second, time.Second}, Inc: [2]time.Duration{2 * time.Second, 2 * time.Second}},
	} {
		soft, hard, timed := lim.budget(rules.First)
		if !timed || hard > time.Second/2 || soft > hard {
			t.Errorf("%+v: soft %v, hard %v (timed %v); want at most half the second left", lim, soft, hard, timed)
		}
	}
}

// TestClockBudgetStopsIteratingAtItsShare: with a long game ahead, no new
// iteration starts past the move's share of the clock (a fortieth of the
// time left); the hard limit is only for the iteration in progress, or
// every move would take three shares and the engine would run short.
func TestClockBudgetStopsIteratingAtItsShare(t *testing.T) {
	lim := Limits{Time: [2]time.Duration{time.Minute, time.Minute}}
	soft, hard, _ := lim.budget(rules.First)
	if share := time.Minute / 40; soft > share || hard <= soft {
		t.Errorf("soft %v, hard %v; want no new iteration after %v, and room to finish one", soft, hard, share)
	}
}
