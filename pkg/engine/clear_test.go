package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/palacehq/palace/pkg/rules"
)

// TestClearPlaysAsANewTable: a search after Clear must not depend on the
// searches before it (equal seeds give equal answers), however many there
// were and whether or not they were cleared in between: the same search
// on a new engine must give the same move, score, principal variation and
// node count. A small table makes old entries collide with new ones.
func TestClearPlaysAsANewTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var positions []*rules.Position
	for _, v := range []rules.Variant{rules.Janggi, rules.Xiangqi} {
		for range 4 {
			p := mustFEN(t, v, rules.StartFEN(v))
			for range 6 + rng.IntN(20) {
				moves := p.LegalMoves(nil)
				if len(moves) == 0 {
					break
				}
				p.Make(moves[rng.IntN(len(moves))])
			}
			positions = append(positions, p)
		}
	}
	lim := Limits{Nodes: 4000}
	fresh := func(p *rules.Position) Result {
		e := New(Options{HashMB: 1})
		r, err := e.Search(context.Background(), p, nil, lim, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	want := make([]Result, len(positions))
	for i, p := range positions {
		want[i] = fresh(p)
	}
	same := func(a, b Result) bool {
		return a.Move == b.Move && a.Score == b.Score && a.Nodes == b.Nodes && slices.Equal(a.PV, b.PV)
	}
	// One engine serves 150 searches: runs of searches without a clear
	// (as a game played over UCI), of up to 70, then a clear and a
	// search that must match the new engine's.
	e := New(Options{HashMB: 1})
	for round := range 150 {
		for range rng.IntN(3) * rng.IntN(36) {
			if _, err := e.Search(context.Background(), positions[rng.IntN(len(positions))], nil, Limits{Nodes: 500}, nil); err != nil {
				t.Fatal(err)
			}
		}
		i := rng.IntN(len(positions))
		e.Clear()
		got, err := e.Search(context.Background(), positions[i], nil, lim, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !same(got, want[i]) {
			t.Fatalf("round %d, position %d: after Clear %s, a new engine %s", round, i, show(got), show(want[i]))
		}
	}
}

func show(r Result) string {
	return fmt.Sprintf("%v score %d nodes %d pv %v", r.Move, r.Score, r.Nodes, r.PV)
}

// TestClearedTableAnswersAsAZeroedOne drives a tiny table through random
// searches, stores and clears next to one that is zeroed at each clear:
// every probe must find the same entry in both, also after the search
// generations have wrapped around many times.
func TestClearedTableAnswersAsAZeroedOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	// Buckets left alone for many generations, as most of a real table
	// is, keep the entries a clear left behind until the generations wrap
	// onto theirs.
	salted := &table{buckets: make([]ttBucket, 64), mask: 63, live: 1}
	zeroed := &table{buckets: make([]ttBucket, 64), mask: 63, live: 1}
	keys := make([]uint64, 256)
	for i := range keys {
		keys[i] = rng.Uint64()
	}
	for step := range 400_000 {
		// Phases of short games (a clear every ten searches or so) and of
		// long ones (a hundred searches or more).
		clearPerMille := 50
		if step/20_000%2 == 1 {
			clearPerMille = 5
		}
		switch n := rng.IntN(1000); {
		case n < clearPerMille:
			salted.clear()
			zeroed.zero()
		case n < 500:
			salted.newSearch()
			zeroed.newSearch()
		default:
			k := keys[rng.IntN(len(keys))]
			mv, score, depth, bound := rules.Move(rng.IntN(1000)), rng.IntN(200), rng.IntN(12), 1+rng.IntN(3)
			salted.store(k, mv, score, 0, depth, bound)
			zeroed.store(k, mv, score, 0, depth, bound)
		}
		for range 16 {
			k := keys[rng.IntN(len(keys))]
			a, okA := salted.probe(k)
			b, okB := zeroed.probe(k)
			// Keys are stored salted, and the generations are counted on
			// from the clear in one table and from 0 in the other.
			a.key, b.key = 0, 0
			a.genBound, b.genBound = a.genBound&3, b.genBound&3
			if okA != okB || a != b {
				t.Fatalf("step %d, key %x: cleared table found %v %+v, zeroed one %v %+v", step, k, okA, a, okB, b)
			}
		}
	}
}

// TestAGameAfterClearPlaysAsOnANewEngine: a whole game after Clear (as a
// UCI ucinewgame is), its searches keeping what they learn from move to
// move, must play as the same game on a new engine: long enough for the
// generations to wrap, past where old entries must be dropped.
func TestAGameAfterClearPlaysAsOnANewEngine(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	var line []*rules.Position
	p := mustFEN(t, rules.Janggi, rules.StartFEN(rules.Janggi))
	for range 40 {
		line = append(line, p.Clone())
		moves := p.LegalMoves(nil)
		if len(moves) == 0 {
			break
		}
		p.Make(moves[rng.IntN(len(moves))])
	}
	lim := Limits{Nodes: 1500}
	used := New(Options{HashMB: 1})
	for range 20 {
		if _, err := used.Search(context.Background(), line[rng.IntN(len(line))], nil, lim, nil); err != nil {
			t.Fatal(err)
		}
	}
	used.Clear()
	fresh := New(Options{HashMB: 1})
	for i := range 2 * len(line) {
		pos := line[i/2] // each position twice: the second search finds the first's entries
		a, err := used.Search(context.Background(), pos, nil, lim, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := fresh.Search(context.Background(), pos, nil, lim, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a.Move != b.Move || a.Score != b.Score || a.Nodes != b.Nodes || !slices.Equal(a.PV, b.PV) {
			t.Fatalf("search %d after Clear: %s; on a new engine: %s", i, show(a), show(b))
		}
	}
}
