package engine

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/palacehq/palace/pkg/rules"
)

func TestLevelTable(t *testing.T) {
	for n := MinLevel; n <= MaxLevel; n++ {
		l := Level(n)
		if l.Level != n {
			t.Fatalf("Level(%d).Level = %d", n, l.Level)
		}
		if l.Nodes == 0 {
			t.Errorf("level %d has no node budget", n)
		}
		if n > MinLevel {
			p := Level(n - 1)
			if l.Nodes < p.Nodes || l.Noise > p.Noise || (l.Depth != 0 && l.Depth < p.Depth) {
				t.Errorf("level %d (%+v) is not at least as strong as level %d (%+v)", n, l, n-1, p)
			}
		}
	}
	if Level(0) != Level(1) || Level(99) != Level(10) {
		t.Error("Level does not clamp")
	}
}

func TestLevelOneVaries(t *testing.T) {
	for _, v := range []rules.Variant{rules.Xiangqi, rules.Janggi} {
		p := mustFEN(t, v, rules.StartFEN(v))
		legal := p.LegalMoves(nil)
		seen := map[rules.Move]bool{}
		for seed := uint64(0); seed < 12; seed++ {
			e := New(Options{HashMB: 1})
			res, err := e.Search(context.Background(), p, nil, Level(1).Limits(seed), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(legal, res.Move) {
				t.Fatalf("%v: illegal move %v", v, res.Move)
			}
			seen[res.Move] = true
		}
		if len(seen) < 3 {
			t.Errorf("%v: level 1 played only %d different first moves over 12 seeds", v, len(seen))
		}
	}
}

func TestLevelOneTakesMateInOne(t *testing.T) {
	for _, tc := range mateCases {
		if tc.wantN != 1 {
			continue
		}
		p := mustFEN(t, tc.variant, tc.fen)
		for seed := uint64(0); seed < 4; seed++ {
			res, err := New(Options{HashMB: 1}).Search(context.Background(), p, nil, Level(1).Limits(seed), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !moveMatesIn(p, res.Move, 1) {
				t.Errorf("%s seed %d: level 1 played %v", tc.name, seed, res.Move)
			}
		}
	}
}

func TestChooseFormation(t *testing.T) {
	han := rules.SangMaSangMa
	for _, level := range []int{1, 5, 10} {
		for _, opp := range []*rules.Formation{nil, &han} {
			f := ChooseFormation(level, 7, opp)
			if !f.Valid() {
				t.Fatalf("level %d: invalid formation %v", level, f)
			}
			if again := ChooseFormation(level, 7, opp); again != f {
				t.Fatalf("level %d: not reproducible: %v then %v", level, f, again)
			}
		}
	}
	seen := map[rules.Formation]bool{}
	for seed := uint64(0); seed < 16; seed++ {
		seen[ChooseFormation(1, seed, nil)] = true
	}
	if len(seen) < 3 {
		t.Errorf("level 1 chose only %v over 16 seeds", seen)
	}
}

func TestEloDiff(t *testing.T) {
	for _, tc := range []struct {
		name          string
		w, d, l       int
		wantElo       float64
		wantLowBelow  float64
		wantHighAbove float64
	}{
		{"even", 10, 0, 10, 0, 0, 0},
		{"three quarters", 15, 0, 5, 190.85, 190.85, 190.85},
		{"all draws", 0, 10, 0, 0, -50, 50},
	} {
		elo, low, high := EloDiff(tc.w, tc.d, tc.l)
		if math.Abs(elo-tc.wantElo) > 0.01 {
			t.Errorf("%s: elo %.2f, want %.2f", tc.name, elo, tc.wantElo)
		}
		if low > tc.wantLowBelow || high < tc.wantHighAbove {
			t.Errorf("%s: interval [%.1f, %.1f] does not contain %.1f", tc.name, low, high, tc.wantElo)
		}
	}
	if elo, low, high := EloDiff(8, 0, 0); !math.IsInf(elo, 1) || !math.IsInf(high, 1) || math.Abs(low-127) > 2 {
		t.Errorf("8 wins of 8: elo %v [%v, %v], want +Inf [about 127, +Inf]", elo, low, high)
	}
	for _, n := range []int{1, 20, 40, 1000} {
		if _, _, high := EloDiff(n, 0, 0); !math.IsInf(high, 1) {
			t.Errorf("%d wins of %d: upper bound %v, want +Inf", n, n, high)
		}
		if _, low, _ := EloDiff(0, 0, n); !math.IsInf(low, -1) {
			t.Errorf("%d losses of %d: lower bound %v, want -Inf", n, n, low)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, v := range []rules.Variant{rules.Xiangqi, rules.Janggi} {
		a := NewLevelPlayer(2, 1, 1)
		b := NewLevelPlayer(1, 2, 1)
		// Cheaper than the real levels: this tests the match, not them.
		a.spec = LevelSpec{Level: 2, Depth: 1, Nodes: 300, Noise: 50}
		b.spec = LevelSpec{Level: 1, Depth: 1, Nodes: 300, Noise: 200}
		ops := RandomOpenings(v, 1, 2, 9)
		if len(ops) != 1 || len(ops[0].Moves) != 2 {
			t.Fatalf("RandomOpenings: %+v", ops)
		}
		if again := RandomOpenings(v, 1, 2, 9); again[0].Name != ops[0].Name {
			t.Fatalf("RandomOpenings not reproducible: %q then %q", ops[0].Name, again[0].Name)
		}
		var progress int
		res, err := Match(context.Background(), a, b, 2, v, ops, Adjudication{}, func(rec GameRecord, r MatchResult) {
			progress++
			if !rec.Outcome.Ended {
				t.Errorf("game %d not ended: %v", rec.Index, rec.Outcome)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Games != 2 || progress != 2 || res.Wins+res.Draws+res.Losses != 2 {
			t.Fatalf("%v: %+v after %d progress calls", v, res, progress)
		}
		if res.Records[0].First != a.Name() || res.Records[1].First != b.Name() {
			t.Errorf("%v: sides did not alternate: %s, %s", v, res.Records[0].First, res.Records[1].First)
		}
		for _, rec := range res.Records {
			if rec.Note != "" && rec.Outcome.Method == rules.Resignation {
				t.Errorf("%v: game %d forfeited: %s", v, rec.Index, rec.Note)
			}
			t.Logf("%v game %d: %s vs %s, %v in %d plies (%s)", v, rec.Index, rec.First, rec.Second, rec.Outcome, len(rec.Moves), rec.Note)
		}
	}
}

// TestLevelTenChoosesItsFormationBySearch: full strength weighs the
// formations and has no noise, so its answer to a given formation does
// not depend on the seed; only levels 1-3 choose at random.
func TestLevelTenChoosesItsFormationBySearch(t *testing.T) {
	han := rules.MaSangMaSang
	first := ChooseFormation(10, 0, &han)
	for seed := uint64(1); seed < 8; seed++ {
		if f := ChooseFormation(10, seed, &han); f != first {
			t.Fatalf("level 10 answered %v with seed 0, %v with seed %d", first, f, seed)
		}
	}
}

// TestALevelKeepsItsNodeBudgetAfterItsFirstIteration: a level's node budget
// bounds its search once the first iteration (one ply and the captures
// after it) is complete. That iteration always runs to its end, so that
// every move has a score for the level's noise to draw among; in positions
// rich in captures it alone can take the weak levels past their budget,
// as docs/ai.md says, and the search then ends with it.
func TestALevelKeepsItsNodeBudgetAfterItsFirstIteration(t *testing.T) {
	for _, v := range []rules.Variant{rules.Xiangqi, rules.Janggi} {
		rng := rand.New(rand.NewPCG(3, uint64(v)))
		e := New(Options{HashMB: 4})
		for i := range 60 {
			g := randomGame(t, v, rng, rng.IntN(150))
			if g.Outcome().Ended {
				continue
			}
			spec := Level(1 + i%7)
			e.Clear()
			var first uint64
			res, err := e.SearchGame(context.Background(), g, spec.Limits(uint64(i)), func(in Info) {
				if first == 0 {
					first = in.Nodes
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Nodes > max(spec.Nodes, first) {
				t.Errorf("%v level %d after %d plies: searched %d nodes, its first iteration %d, budget %d",
					v, spec.Level, len(g.Moves()), res.Nodes, first, spec.Nodes)
			}
		}
	}
}
