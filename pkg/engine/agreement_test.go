package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/palacehq/palace/pkg/rules"
)

// outcomeSign is the result of a finished game for the side to move after
// its last ply: +1 it won, -1 it lost, 0 a draw.
func outcomeSign(o rules.Outcome, toMove rules.Side) int {
	switch o.Winner {
	case rules.Draw:
		return 0
	case rules.FirstWins:
		if toMove == rules.First {
			return 1
		}
		return -1
	case rules.SecondWins:
		if toMove == rules.Second {
			return 1
		}
		return -1
	}
	panic("not ended")
}

func scoreSign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

// pickMove chooses the next move of a random game, biased toward
// undoing the mover's last move (so that cycles are common), passes, and
// few captures.
func pickMove(rng *rand.Rand, g *rules.Game, mode int) rules.Move {
	if mode == 2 && rng.IntN(30) != 0 {
		// Long games: avoid ending the game if possible.
		for tries := 0; tries < 12; tries++ {
			m := pickMove(rng, g, 1)
			c := g.Clone()
			if _, err := c.Play(m); err == nil && !c.Outcome().Ended {
				return m
			}
		}
	}
	legal := g.LegalMoves()
	mv := g.Moves()
	n := len(mv)
	if n >= 2 && rng.IntN(10) < 6-4*min(mode, 1) {
		back := mv[n-2]
		if back.IsPass() {
			if slices.Contains(legal, back) {
				return back
			}
		} else if r := rules.NewMove(back.To(), back.From()); slices.Contains(legal, r) {
			return r
		}
	}
	if n >= 4 && rng.IntN(10) < 3 {
		if slices.Contains(legal, mv[n-4]) {
			return mv[n-4]
		}
	}
	pos := g.Position()
	for tries := 0; tries < 8; tries++ {
		m := legal[rng.IntN(len(legal))]
		if m.IsPass() && rng.IntN(4) != 0 {
			continue
		}
		if !m.IsPass() && pos.PieceAt(m.To()) != rules.NoPiece && rng.IntN(4) != 0 {
			continue
		}
		return m
	}
	return legal[rng.IntN(len(legal))]
}

// exactVerdicts is a searcher whose root is always the position before the last
// ply, so that its adjudication of the last position involves no search
// line (no second-occurrence scoring) and must match rules.Game exactly.
type exactVerdicts struct {
	s *searcher
}

func (e *exactVerdicts) push(m rules.Move) {
	e.s.make(m, 0)
	e.s.histUndo = append(e.s.histUndo, e.s.undo[0])
	e.s.root = len(e.s.st) - 1
}

// verdict plays m as the search's ply 0 from the root and returns the
// engine's verdict at ply 1, as search would reach it: adjudicate, and a
// side to move without a legal move loses.
func (e *exactVerdicts) verdict(m rules.Move) (int, bool) {
	s := e.s
	s.make(m, 0)
	defer s.unmake(0)
	if v, ok := s.adjudicate(1); ok {
		return v, true
	}
	if s.noLegalMoves(1) {
		return -mateScore + 1, true
	}
	return 0, false
}

// playAgainstTheRules plays games random games of v from fens (few pieces,
// so that repetitions, perpetual checks and chases, passes and the ply
// limits come often) and checks the engine against rules.Game, the
// authority, at every ply: the endings it adjudicates (whether, who, how
// far), the distance it gives a second occurrence scored as final (the
// cycle played again to its third), and, with withSearch, the moves and
// lines its searches give.
func playAgainstTheRules(t *testing.T, v rules.Variant, fens []string, games int, withSearch bool) {
	t.Helper()
	eng := New(Options{HashMB: 1})
	var fails []string
	fail := func(f string, a ...any) {
		if len(fails) < 12 {
			fails = append(fails, fmt.Sprintf(f, a...))
		}
	}
	stats := map[string]int{}
	var late []string
	for gi := 0; gi < games; gi++ {
		fen := fens[gi%len(fens)]
		rng := rand.New(rand.NewPCG(uint64(gi), 77))
		g, err := rules.NewGame(v, fen)
		if err != nil {
			t.Fatalf("%s: %v", fen, err)
		}
		if g.Outcome().Ended {
			continue
		}
		start := mustFEN(t, v, fen)
		ex := &exactVerdicts{s: newSearcher()}
		if err := ex.s.setup(start, nil); err != nil {
			t.Fatal(err)
		}
		// tree: a searcher rooted at game ply root, the rest a search line.
		tree := newSearcher()
		root := 0
		if err := tree.setup(start, nil); err != nil {
			t.Fatal(err)
		}
		for !g.Outcome().Ended {
			if withSearch && rng.IntN(10) == 0 {
				res, err := eng.SearchGame(context.Background(), g, Limits{Depth: 1 + rng.IntN(6)}, nil)
				if err != nil {
					t.Fatalf("search: %v", err)
				}
				c := g.Clone()
				if _, err := c.Play(res.Move); err != nil {
					fail("game %d (%s) ply %d: engine plays %v which rules refuse: %v", gi, fen, g.Plies(), res.Move, err)
				} else if res.Mate == 1 {
					o := c.Outcome()
					if !o.Ended || outcomeSign(o, c.Position().Turn()) != -1 {
						fail("game %d ply %d moves %v: engine claims a win in 1 by %v; rules: %v", gi, g.Plies(), g.Moves(), res.Move, o)
					}
				}
				stats["search"]++
				if res.Mate != 0 {
					stats["search-mate"]++
					c := g.Clone()
					us := c.Position().Turn()
					pvEnded := false
					for j, pm := range res.PV {
						if _, err := c.Play(pm); err != nil {
							fail("game %d ply %d moves %v: PV %v move %d refused: %v", gi, g.Plies(), g.Moves(), res.PV, j+1, err)
							break
						}
						if o := c.Outcome(); o.Ended {
							w := 1
							if (o.Winner == rules.FirstWins) != (us == rules.First) {
								w = -1
							}
							if o.Winner == rules.Draw || w*res.Mate < 0 || j+1 != abs(res.Mate) {
								fail("game %d ply %d moves %v: search Mate %d PV %v; rules end the game after PV ply %d: %v", gi, g.Plies(), g.Moves(), res.Mate, res.PV, j+1, o)
							}
							pvEnded = true
							break
						}
					}
					if !pvEnded && len(res.PV) > 0 && abs(res.Mate) > len(res.PV) && c.Plies() == g.Plies()+len(res.PV) {
						mv := c.Moves()
						hs := hashesOf(t, v, fen, mv)
						n := len(mv)
						recent := -1
						for i := n - 2; i > g.Plies(); i -= 2 {
							if hs[i] == hs[n] {
								recent = i
								break
							}
						}
						if recent > 0 {
							stats["search-pv-cycle"]++
							cyc := mv[recent:n]
							extra := 0
							for _, cm := range cyc {
								if _, err := c.Play(cm); err != nil {
									break
								}
								extra++
								if c.Outcome().Ended {
									break
								}
							}
							if o := c.Outcome(); o.Ended && len(res.PV)+extra != abs(res.Mate) {
								stats["search-pv-cycle-mismatch"]++
								if len(late) < 6 {
									late = append(late, fmt.Sprintf("SEARCH game %d ply %d moves %v: Engine.SearchGame Mate %d, PV %v ends in a second occurrence; repeating its cycle %v the rules end the game %d plies from the root: %v", gi, g.Plies(), g.Moves(), res.Mate, res.PV, cyc, len(res.PV)+extra, o))
								}
							}
						}
					}
				}
			}
			m := pickMove(rng, g, gi%3)
			n := g.Plies() + 1
			// The engine's exact verdict at the new position.
			ev, eEnded := ex.verdict(m)
			// The tree's verdict.
			tree.make(m, n-root-1)
			tv, tEnded := tree.adjudicate(n - root)
			if !tEnded && tree.noLegalMoves(n-root) {
				tv, tEnded = -mateScore+(n-root), true
			}
			if _, err := g.Play(m); err != nil {
				t.Fatalf("play %v: %v", m, err)
			}
			o := g.Outcome()
			toMove := g.Position().Turn()
			ctx := func() string {
				return fmt.Sprintf("game %d (%v %s) ply %d, moves %v", gi, v, fen, n, g.Moves())
			}
			if o.Ended {
				stats[o.Method.String()]++
				if !eEnded {
					fail("%s: rules end the game (%v), engine does not", ctx(), o)
				} else if scoreSign(ev) != outcomeSign(o, toMove) {
					fail("%s: rules %v (sign %d for side to move), engine score %d", ctx(), o, outcomeSign(o, toMove), ev)
				} else if d := abs(mateIn(ev)); ev != 0 && d != 1 {
					fail("%s: rules end now (%v), engine distance %d", ctx(), o, d)
				}
				if !tEnded {
					fail("%s: rules end the game (%v), tree (root %d) does not", ctx(), o, root)
				} else if scoreSign(tv) != outcomeSign(o, toMove) {
					fail("%s: rules %v, tree (root %d) score %d", ctx(), o, root, tv)
				} else if d := abs(mateIn(tv)); tv != 0 && d != n-root {
					// A tree may legitimately have ended earlier (second
					// occurrence); that is handled when it happens.
					fail("%s: rules end now (%v), tree (root %d) distance %d want %d", ctx(), o, root, d, n-root)
				}
				continue
			}
			if eEnded {
				fail("%s: rules go on, engine (root at previous ply) says ended with %d", ctx(), ev)
			}
			if tEnded {
				stats["tree-decided"]++
				// Must be a second occurrence inside the line: repeat the
				// cycle in the game and see when and how it ends.
				mv := g.Moves()
				hs := hashesOf(t, v, fen, mv)
				recent := -1
				for i := n - 2; i >= 0; i -= 2 {
					if hs[i] == hs[n] {
						recent = i
						break
					}
				}
				if recent < root {
					fail("%s: tree (root %d) scores %d though the position's last occurrence is at %d (not in the line)", ctx(), root, tv, recent)
				} else {
					cycle := mv[recent:n]
					c := g.Clone()
					played := 0
					for _, cm := range cycle {
						if _, err := c.Play(cm); err != nil {
							fail("%s: replaying the cycle: %v", ctx(), err)
							break
						}
						played++
						if c.Outcome().Ended {
							break
						}
					}
					co := c.Outcome()
					// Sign from the node's side to move (same as c's, the
					// cycle has even length).
					if !co.Ended {
						fail("%s: tree (root %d) scores the 2nd occurrence as %d (mate_in %d), but repeating the cycle %v does not end the game", ctx(), root, tv, mateIn(tv), cycle)
					} else {
						stats["tree-"+co.Method.String()]++
						wantSign := outcomeSign(co, c.Position().Turn())
						if played%2 == 1 {
							wantSign = -wantSign
						}
						wantDist := (n - root) + played
						if scoreSign(tv) != wantSign {
							fail("%s: tree (root %d) scores the 2nd occurrence %d; repeating the cycle %v the rules end it after %d more plies with %v (sign %d)", ctx(), root, tv, cycle, played, co, wantSign)
						} else if tv != 0 && abs(mateIn(tv)) != wantDist {
							stats["tree-distance-mismatch"]++
							if len(late) < 3 {
								late = append(late, fmt.Sprintf("%s: tree (root %d) claims the end %d plies from the root (mate_in %d); repeating the cycle %v the rules end it at %d (%v, %d more plies)", ctx(), root, abs(mateIn(tv)), mateIn(tv), cycle, wantDist, co, played))
							}
							if abs(mateIn(tv)) < wantDist {
								fail("%s: distance short", ctx())
							}
						}
					}
				}
			}
			ex.push(m)
			// Re-root the tree now and then, and whenever it ended (a search
			// does not go below a decided node) or runs deep.
			if tEnded || n-root >= maxPly-2 || rng.IntN(40) == 0 {
				root = n
				if err := tree.setup(start, g.Moves()); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	t.Logf("%v: %v", v, stats)
	if len(late) > 0 || stats["search-pv-cycle-mismatch"] > 0 {
		t.Errorf("%d second occurrences in a line are dated later than the rules end the repeated cycle, e.g.:\n%s", stats["tree-distance-mismatch"], joinLines(late))
	}
	if len(fails) > 0 {
		t.Errorf("%d+ disagreements:\n%s", len(fails), joinLines(fails))
	}
}

func joinLines(s []string) string {
	out := ""
	for _, l := range s {
		out += l + "\n"
	}
	return out
}

func hashesOf(t *testing.T, v rules.Variant, fen string, mv []rules.Move) []uint64 {
	p := mustFEN(t, v, fen)
	hs := []uint64{p.Hash()}
	for _, m := range mv {
		p.Make(m)
		hs = append(hs, p.Hash())
	}
	return hs
}

var fewPiecesJanggi = []string{
	"3k4n/9/9/9/9/9/9/9/9/R3K4 w - - 0 1",
	"4k4/4a4/9/4p4/9/9/4P4/9/4A4/R3K3r w - - 0 1",
	"3ak4/9/9/2p6/9/9/6P2/9/9/3AK3R w - - 0 1",
	"4k4/9/4c4/9/2p6/9/6P2/4C4/9/4K4 w - - 0 1",
	"4k4/9/9/9/9/9/9/9/9/3K1R3 b - - 0 1",
	"3k5/r8/9/9/1p7/7P1/9/9/8R/5K3 w - - 0 1",
}

var fewPiecesXiangqi = []string{
	"4k4/9/9/9/9/9/9/9/9/R2K5 w - - 0 1",
	"2bakab1r/8r/1c7/1R7/9/9/9/9/9/3K5 b - - 0 1",
	"5k3/9/2c6/1R7/9/9/9/9/9/4K4 w - - 0 1",
	"3k5/9/9/9/4n4/9/4N4/9/9/4K3R w - - 0 1",
	"4k4/4a4/9/9/2p6/6P2/9/9/4A4/3K1R3 w - - 0 1",
	"3k5/r8/4b4/9/9/9/9/4B4/8R/5K3 w - - 0 1",
	"3ak4/9/4c4/9/9/9/9/2C6/9/3AK4 w - - 0 1",
}

func TestTheEngineEndsJanggiGamesAsTheRulesDo(t *testing.T) {
	playAgainstTheRules(t, rules.Janggi, fewPiecesJanggi, 120, true)
}

func TestTheEngineEndsXiangqiGamesAsTheRulesDo(t *testing.T) {
	playAgainstTheRules(t, rules.Xiangqi, fewPiecesXiangqi, 120, true)
}

// TestACycleThroughTheRootWasDatedLate: a search line that leaves the root
// position, comes back to it (its second occurrence, not scored: the
// earlier one is the root, not in the tree), and then returns to the
// position after its first move (a second occurrence inside the tree,
// scored as final) was dated at that position's third occurrence, 4 plies
// later. Repeating the cycle, rules.Game ends the game sooner, at the root
// position's own third occurrence (perpetual check, Red loses).
func TestACycleThroughTheRootWasDatedLate(t *testing.T) {
	const fen = "4k4/9/9/9/9/9/9/9/9/R2K5 w - - 0 1"
	history := mustMoves(t, "a1a10", "e10e9")
	line := mustMoves(t, "a10a9", "e9e10", "a9a10", "e10e9", "a10a9")
	g := replay(t, rules.Xiangqi, fen, history)
	// The rules, repeating the cycle after the line.
	c := g.Clone()
	rest := mustMoves(t, "e9e10", "a9a10", "e10e9", "a10a9")
	played := playUntilEnded(t, c, append(slices.Clone(line), rest...))
	o := c.Outcome()
	if !o.Ended {
		t.Fatalf("rules: the game does not end repeating the cycle")
	}
	t.Logf("rules: %v after %d plies from the root", o, played)

	s := newSearcher()
	if err := s.setup(mustFEN(t, rules.Xiangqi, fen), history); err != nil {
		t.Fatal(err)
	}
	for ply, m := range line {
		s.make(m, ply)
		if ply+1 < len(line) {
			if v, ended := s.adjudicate(ply + 1); ended {
				t.Fatalf("ended early at ply %d: %d", ply+1, v)
			}
		}
	}
	v, ended := s.adjudicate(len(line))
	if !ended || mateIn(v) == 0 {
		t.Fatalf("line %v: not scored as decided (%d, %v)", line, v, ended)
	}
	// Side to move after the line is Black, the winner.
	if o.Winner != rules.SecondWins || v <= 0 {
		t.Fatalf("result: rules %v, engine score %d", o, v)
	}
	if mateIn(v) != played {
		t.Errorf("the engine dates the end %d plies from the root (mate_in %d); repeating the cycle the rules end the game %d plies from the root (%v)", mateIn(v), mateIn(v), played, o)
	}
}

// TestTheMateOfACycleThroughTheRootWasLate: Cho (a bare general) loses on
// points whatever happens. The engine's PV shuffles the general back to the
// root position and once more, and reported Mate -9: the end dated at the
// third occurrence of the position after its first move. Playing that PV
// and repeating its cycle, rules.Game ends the game after 8 plies, at the
// root position's third occurrence.
func TestTheMateOfACycleThroughTheRootWasLate(t *testing.T) {
	const fen = "4k4/9/9/9/9/9/9/9/9/3K1R3 b - - 0 1"
	g := replay(t, rules.Janggi, fen, mustMoves(t, "e10d10", "f1e1", "d10d9", "e1e4", "d9d8", "e4e8", "d8e8"))
	checked := 0
	for depth := 5; depth <= 8; depth++ {
		res, err := New(Options{HashMB: 1}).SearchGame(context.Background(), g, Limits{Depth: depth}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Mate == 0 || len(res.PV) == 0 {
			continue
		}
		c := g.Clone()
		for _, m := range res.PV {
			if _, err := c.Play(m); err != nil {
				t.Fatalf("depth %d: PV %v: %v", depth, res.PV, err)
			}
			if c.Outcome().Ended {
				break
			}
		}
		played := c.Plies() - g.Plies()
		if !c.Outcome().Ended {
			// The PV ends in a second occurrence: repeat its cycle.
			hs := hashesOf(t, rules.Janggi, fen, c.Moves())
			n := c.Plies()
			recent := -1
			for i := n - 2; i > g.Plies(); i -= 2 {
				if hs[i] == hs[n] {
					recent = i
					break
				}
			}
			if recent < 0 {
				continue
			}
			played += playUntilEnded(t, c, slices.Clone(c.Moves()[recent:n]))
		}
		o := c.Outcome()
		if !o.Ended {
			continue
		}
		checked++
		if abs(res.Mate) != played || (res.Mate < 0) != (o.Winner == rules.SecondWins) {
			t.Errorf("depth %d: SearchGame reports Mate %d with PV %v; played on, rules.Game ends the game %d plies from the root: %v", depth, res.Mate, res.PV, played, o)
		}
	}
	if checked == 0 {
		t.Fatal("no depth gave a decided PV to check")
	}
}

// playUntilEnded plays moves in g until the game ends, and says how many
// it played.
func playUntilEnded(t *testing.T, g *rules.Game, moves []rules.Move) int {
	t.Helper()
	for i, m := range moves {
		if _, err := g.Play(m); err != nil {
			t.Fatal(err)
		}
		if g.Outcome().Ended {
			return i + 1
		}
	}
	return len(moves)
}

// treeVerdict plays line from the game (start fen, history) as a
// search line rooted after history, and returns the engine's adjudication
// of the line's last position. Every earlier position of the line must go
// on.
func treeVerdict(t *testing.T, v rules.Variant, fen string, history, line []rules.Move) (int, bool) {
	t.Helper()
	s := newSearcher()
	if err := s.setup(mustFEN(t, v, fen), history); err != nil {
		t.Fatal(err)
	}
	for ply, m := range line {
		s.make(m, ply)
		if ply+1 < len(line) {
			if sc, ended := s.adjudicate(ply + 1); ended {
				t.Fatalf("line %v: ended early at ply %d with %d", line, ply+1, sc)
			}
		}
	}
	return s.adjudicate(len(line))
}

// TestARepetitionWasJudgedOverItsCycleAlone: a search line ends in a
// second occurrence (scored as final) and one of the cycle's positions (Q)
// came before it, so the game ends at Q's third occurrence. The rules judge
// perpetual check over the plies from Q's first occurrence to its third;
// the engine judged it over the cycle alone. Red gave a quiet move between
// Q's first occurrence and the cycle: the rules draw (plain repetition),
// where the engine scored a loss for Red by perpetual check.
func TestARepetitionWasJudgedOverItsCycleAlone(t *testing.T) {
	const fen = "R8/4k4/9/9/9/9/9/9/9/3K5 w - - 0 1" // Q: Ra10, ke9, Kd1, Red to move
	line := mustMoves(t,
		"a10b10", "e9f9", "b10b9", "f9f10", "b9a9", "f10e10", // quiet Red move a10b10, then to P0
		"a9a10", "e10e9", "a10a9", "e9e10") // the checking cycle back to P0
	g, err := rules.NewGame(rules.Xiangqi, fen)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range line {
		if _, err := g.Play(m); err != nil {
			t.Fatal(err)
		}
		if g.Outcome().Ended {
			t.Fatalf("rules end the game early: %v", g.Outcome())
		}
	}
	sc, ended := treeVerdict(t, rules.Xiangqi, fen, nil, line)
	if !ended {
		t.Fatal("the engine does not end the line at its second occurrence")
	}
	// The rules, playing the cycle again.
	c := g.Clone()
	played := playUntilEnded(t, c, mustMoves(t, "a9a10", "e10e9", "a10a9", "e9e10"))
	o := c.Outcome()
	if !o.Ended {
		t.Fatalf("rules: the game does not end repeating the cycle")
	}
	// sc is from the view of the side to move after the line (Red).
	want := outcomeSign(o, c.Position().Turn())
	if played%2 == 1 {
		want = -want
	}
	if scoreSign(sc) != want {
		t.Errorf("engine scores the line's end %d (mate_in %d, sign %d for Red to move); repeating the cycle the rules end the game %d plies later: %v (sign %d)", sc, mateIn(sc), scoreSign(sc), played, o, want)
	}
}
