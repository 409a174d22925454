package engine

import (
	"context"
	"time"

	"github.com/palacehq/palace/pkg/rules"
)

// LevelSpec is the playing strength of one level: search limits and the
// root noise that makes the weaker levels err and vary (see Limits.Noise).
type LevelSpec struct {
	Level    int
	Depth    int
	Nodes    uint64
	MoveTime time.Duration
	Noise    int
}

// levels is the level table. Every level has a node budget, so a level
// plays the same on any machine and, with a fixed seed, the same moves;
// the strong levels also have a wall-time cap for slow or busy machines.
// "At most" is the whole node budget at about 1.1M nodes/s on one core;
// the depth limits of levels 1-7 usually end their searches sooner. The
// budget bounds a search once its first iteration is complete: that one
// always runs to its end, so that every move has a score for the noise to
// draw among, and with the full windows noise needs it can take levels 1-4
// past their budget in positions rich in captures (docs/ai.md has figures).
//
//	level  depth  nodes      movetime  noise (cp)  at most  plays like
//	  1      1        2,000     -        250         2 ms   a beginner: sees captures, not threats; often random
//	  2      1        5,000     -        150         5 ms   a novice: grabs material, misses most tactics
//	  3      2       10,000     -        100        10 ms   sees one reply; still drifts
//	  4      2       20,000     -         60        20 ms
//	  5      3       40,000     -         40        40 ms   a casual player
//	  6      4       50,000     -         25        50 ms
//	  7      5      100,000     -         12        90 ms   a club player
//	  8      -      200,000    2s          8       0.2 s    full search, a little noise
//	  9      -      400,000    3s          3       0.4 s
//	 10      -    1,000,000    5s          0       0.9 s    full strength
//
// Each level scores at least 70% against the level two below it (the
// "palace engine match" figures are in docs/ai.md). The budgets stay
// small enough that one core answers about one level-10 move per second,
// which keeps a pool of workers affordable.
//
// Noise is applied to every root move's exact score (each is searched with
// a full window), drawn from the engine seed, the request seed and the
// position, so the same seed replays the same game. Decided results (mates,
// Janggi point wins) are never blurred by noise: even level 1 takes a mate
// in one and avoids a mate it can see.
var levels = [11]LevelSpec{
	1:  {Level: 1, Depth: 1, Nodes: 2_000, Noise: 250},
	2:  {Level: 2, Depth: 1, Nodes: 5_000, Noise: 150},
	3:  {Level: 3, Depth: 2, Nodes: 10_000, Noise: 100},
	4:  {Level: 4, Depth: 2, Nodes: 20_000, Noise: 60},
	5:  {Level: 5, Depth: 3, Nodes: 40_000, Noise: 40},
	6:  {Level: 6, Depth: 4, Nodes: 50_000, Noise: 25},
	7:  {Level: 7, Depth: 5, Nodes: 100_000, Noise: 12},
	8:  {Level: 8, Nodes: 200_000, MoveTime: 2 * time.Second, Noise: 8},
	9:  {Level: 9, Nodes: 400_000, MoveTime: 3 * time.Second, Noise: 3},
	10: {Level: 10, Nodes: 1_000_000, MoveTime: 5 * time.Second},
}

// MinLevel and MaxLevel bound the levels; Level clamps to them.
const (
	MinLevel = 1
	MaxLevel = 10
)

// Level returns the spec of level n, clamped to 1..10.
func Level(n int) LevelSpec {
	n = min(max(n, MinLevel), MaxLevel)
	return levels[n]
}

// Limits returns the search limits of the level; seed picks the level's
// random choices (equal seeds, equal moves).
func (l LevelSpec) Limits(seed uint64) Limits {
	return Limits{Depth: l.Depth, Nodes: l.Nodes, MoveTime: l.MoveTime, Noise: l.Noise, Seed: seed}
}

var formations = [4]rules.Formation{rules.MaSangSangMa, rules.SangMaSangMa, rules.MaSangMaSang, rules.SangMaMaSang}

// ChooseFormation picks the AI's Janggi formation. Han chooses first
// without seeing Cho's, so opponent == nil means the AI is Han; Cho sees
// Han's choice (opponent != nil) and answers it.
//
// Levels 1-3 choose at random (from seed). Higher levels score each
// candidate by a short search of the resulting start position (Han: its
// worst case over Cho's four answers, since Cho will answer), add a little
// seeded noise below level 10 so that near-equal set-ups vary, and take the
// best. The answer depends only on level, seed and opponent.
func ChooseFormation(level int, seed uint64, opponent *rules.Formation) rules.Formation {
	level = min(max(level, MinLevel), MaxLevel)
	r := splitmix64(seed ^ 0x5bd1e995)
	if level <= 3 {
		return formations[r%4]
	}
	e := New(Options{HashMB: 1, Seed: seed})
	lim := Limits{Depth: 3, Nodes: 3000 + uint64(level)*500}
	// score is Cho's view of the start position for the two formations.
	score := func(cho, han rules.Formation) int {
		p, err := rules.ParseFEN(rules.Janggi, rules.JanggiStartFEN(cho, han))
		if err != nil {
			return 0
		}
		e.Clear()
		res, err := e.Search(context.Background(), p, nil, lim, nil)
		if err != nil {
			return 0
		}
		return res.Score
	}
	noise := (10 - level) * 4
	best, bestVal := formations[0], 0
	for i, f := range formations {
		var v int
		if opponent != nil {
			v = score(f, *opponent)
		} else {
			v = infinity
			for _, cho := range formations {
				v = min(v, -score(cho, f))
			}
		}
		if noise > 0 {
			v += noiseFor(seed, uint64(level), rules.Move(f), noise)
		}
		if i == 0 || v > bestVal {
			best, bestVal = f, v
		}
	}
	return best
}
