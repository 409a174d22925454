package rules

import (
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Games played by a seeded random policy. Legal moves are sorted before
// choosing, so the games do not depend on the move generator's order.

func sortedLegal(g *Game) []Move {
	ms := g.LegalMoves()
	slices.Sort(ms)
	return ms
}

// walkUntilEnd plays moves chosen at random among those allowed by ok until
// the game ends, failing if no move is allowed or maxPlies is passed.
// ok sees the game after the candidate move.
func walkUntilEnd(tb testing.TB, g *Game, rng *rand.Rand, maxPlies int, ok func(after *Game, info MoveInfo) bool) {
	tb.Helper()
	for !g.Outcome().Ended {
		if g.Plies() > maxPlies {
			tb.Fatalf("no end after %d plies", g.Plies())
		}
		ms := sortedLegal(g)
		rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
		played := false
		for _, m := range ms {
			c := g.Clone()
			info, err := c.Play(m)
			if err != nil {
				tb.Fatalf("legal move %v refused: %v", m, err)
			}
			if ok(c, info) {
				*g = *c
				played = true
				break
			}
		}
		if !played {
			tb.Fatalf("after %v: no move fits", g.Moves())
		}
	}
}

func TestJanggi200Plies(t *testing.T) {
	tests := []struct {
		name string
		fen  string
	}{
		{"from the start", ""},
		// The counters say 198 plies played (199 without capture); only
		// the game's own plies count.
		{"fen move counters are not used", strings.Replace(StartFEN(Janggi), "- 0 1", "- 199 100", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGame(t, Janggi, tt.fen)
			rng := rand.New(rand.NewPCG(1, 2))
			walkUntilEnd(t, g, rng, 200, func(after *Game, info MoveInfo) bool {
				o := after.Outcome()
				return info.Captured == NoPiece && (!o.Ended || o.Method == MoveLimit)
			})
			want := Outcome{Ended: true, Winner: SecondWins, Method: MoveLimit, Points: [2]float64{72, 73.5}}
			if g.Plies() != 200 || g.Outcome() != want {
				t.Fatalf("after %d plies: %+v, want %+v after 200", g.Plies(), g.Outcome(), want)
			}
		})
	}
}

// The 200 plies are all the plies of the game: captures do not restart the
// count as they do Xiangqi's 120. The game ends on points, Han's 1.5
// included.
func TestJanggi200PliesWithCaptures(t *testing.T) {
	tests := []struct {
		name       string
		seed       [2]uint64
		wantWinner Winner
	}{
		{"cho ahead", [2]uint64{9, 10}, FirstWins},
		{"han's 1.5 decides", [2]uint64{1, 3}, SecondWins},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGame(t, Janggi, "")
			rng := rand.New(rand.NewPCG(tt.seed[0], tt.seed[1]))
			walkUntilEnd(t, g, rng, 200, func(after *Game, info MoveInfo) bool {
				o := after.Outcome()
				return !o.Ended || o.Method == MoveLimit
			})
			o := g.Outcome()
			if g.Plies() != 200 || o.Method != MoveLimit || o.Winner != tt.wantWinner {
				t.Fatalf("after %d plies: %+v, want %v by move_limit after 200", g.Plies(), o, tt.wantWinner)
			}
			p := g.Position()
			pieces := 0
			for sq := Square(0); sq < NumSquares; sq++ {
				if p.PieceAt(sq) != NoPiece {
					pieces++
				}
			}
			if pieces == 32 {
				t.Fatal("the game captured nothing; it must, to test the count")
			}
			pts := [2]float64{p.Points(First), p.Points(Second)}
			want := SecondWins
			if pts[First] > pts[Second] {
				want = FirstWins
			}
			if o.Points != pts || o.Winner != want {
				t.Fatalf("outcome %+v, want %v on points %v", o, want, pts)
			}
			t.Logf("%d pieces left, points %v", pieces, pts)
		})
	}
}

func TestXiangqi120PliesWithoutCapture(t *testing.T) {
	tests := []struct {
		name      string
		prefix    string
		wantPlies int
	}{
		{"from the start", "", 120},
		{"counted from the last capture", "h3e3 h10g8 e3e7", 123},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGame(t, Xiangqi, "")
			playMoves(t, g, tt.prefix)
			rng := rand.New(rand.NewPCG(3, 4))
			walkUntilEnd(t, g, rng, 200, func(after *Game, info MoveInfo) bool {
				o := after.Outcome()
				return info.Captured == NoPiece && !info.Check && (!o.Ended || o.Method == MoveLimit)
			})
			want := Outcome{Ended: true, Winner: Draw, Method: MoveLimit}
			if g.Plies() != tt.wantPlies || g.Outcome() != want {
				t.Fatalf("after %d plies: %+v, want %+v after %d", g.Plies(), g.Outcome(), want, tt.wantPlies)
			}
		})
	}
}

// refAdjudicate decides the game from scratch by the text of docs/rules.md,
// independently of Game's bookkeeping: positions are compared by FEN board
// and side, captures found by counting pieces, checks by InCheck. For a
// Xiangqi repetition without perpetual check it cannot judge chases, so it
// returns ok=false and the caller accepts Repetition or PerpetualChase.
func refAdjudicate(tb testing.TB, v Variant, start string, moves []Move) (o Outcome, ply int, sure bool) {
	tb.Helper()
	p := mustFEN(tb, v, start)
	key := func(p *Position) string {
		f := strings.Fields(p.FEN())
		return f[0] + " " + f[1]
	}
	count := func(p *Position) (n int) {
		for sq := Square(0); sq < NumSquares; sq++ {
			if p.PieceAt(sq) != NoPiece {
				n++
			}
		}
		return n
	}
	keys := []string{key(p)}
	counts := []int{count(p)}
	checks := []bool{false}
	facing := []bool{p.GeneralsFacing()}
	points := func(w Winner, m Method) Outcome {
		o := Outcome{Ended: true, Winner: w, Method: m}
		if v == Janggi {
			o.Points = [2]float64{p.Points(First), p.Points(Second)}
			if o.Winner == NoWinner {
				o.Winner = SecondWins
				if o.Points[First] > o.Points[Second] {
					o.Winner = FirstWins
				}
			}
		}
		return o
	}
	for n := 1; n <= len(moves); n++ {
		mover := p.Turn()
		p.Make(moves[n-1])
		keys = append(keys, key(p))
		counts = append(counts, count(p))
		checks = append(checks, p.InCheck())
		facing = append(facing, p.GeneralsFacing())
		noMoves := len(p.LegalMoves(nil)) == 0
		firstOcc, occ := -1, 0
		for i, k := range keys {
			if k == keys[n] {
				occ++
				if firstOcc < 0 {
					firstOcc = i
				}
			}
		}
		perpetual := NoWinner
		if occ >= 3 {
			all := [2]bool{true, true}
			for k := firstOcc + 1; k <= n; k++ {
				s := mover
				if (n-k)%2 == 1 {
					s = mover.Opponent()
				}
				all[s] = all[s] && checks[k]
			}
			switch {
			case all[First] && !all[Second]:
				perpetual = SecondWins
			case all[Second] && !all[First]:
				perpetual = FirstWins
			}
		}
		lastCap := 0
		for k := 1; k <= n; k++ {
			if counts[k] < counts[k-1] {
				lastCap = k
			}
		}
		if v == Janggi {
			switch {
			case n >= 2 && moves[n-1].IsPass() && moves[n-2].IsPass():
				return points(NoWinner, TwoPasses), n, true
			case noMoves:
				return points(winnerFor(mover), Checkmate), n, true
			case n >= 2 && facing[n] && facing[n-1] && counts[n] < counts[0]:
				return points(NoWinner, Bikjang), n, true
			case occ >= 3 && perpetual != NoWinner:
				return points(perpetual, PerpetualCheck), n, true
			case occ >= 3:
				return points(NoWinner, Repetition), n, true
			case n >= 200:
				return points(NoWinner, MoveLimit), n, true
			}
			continue
		}
		insufficient := true
		for sq := Square(0); sq < NumSquares; sq++ {
			switch p.PieceAt(sq).Kind() {
			case Chariot, Horse, Cannon, Soldier:
				insufficient = false
			}
		}
		switch {
		case noMoves && p.InCheck():
			return points(winnerFor(mover), Checkmate), n, true
		case noMoves:
			return points(winnerFor(mover), Stalemate), n, true
		case occ >= 3 && perpetual != NoWinner:
			return points(perpetual, PerpetualCheck), n, true
		case occ >= 3:
			return points(Draw, Repetition), n, false
		case n-lastCap >= 120:
			return points(Draw, MoveLimit), n, true
		case insufficient:
			return points(Draw, InsufficientMaterial), n, true
		}
	}
	o = Outcome{}
	if v == Janggi {
		o.Points = [2]float64{p.Points(First), p.Points(Second)}
	}
	return o, len(moves), true
}

// randomPolicy picks moves with per-game biases, so that random games reach
// many different endings: mates are taken when seen, passes and moves back
// and forth (which make repetitions) are favoured by some games.
type randomPolicy struct {
	rng                                *rand.Rand
	pMate, pPass, pBack, pTake, pCheck float64
}

func (rp *randomPolicy) choose(g *Game) Move {
	ms := sortedLegal(g)
	rng := rp.rng
	if rng.Float64() < rp.pMate {
		for _, m := range ms {
			c := g.Clone()
			if _, err := c.Play(m); err == nil && c.Outcome().Method == Checkmate {
				return m
			}
		}
	}
	if rng.Float64() < rp.pCheck {
		for _, i := range rng.Perm(len(ms)) {
			c := g.Clone()
			if info, err := c.Play(ms[i]); err == nil && info.Check {
				return ms[i]
			}
		}
	}
	if n := g.Plies(); n >= 2 && rng.Float64() < rp.pBack {
		prev := g.moves[n-2]
		back := NewMove(prev.To(), prev.From())
		if slices.Contains(ms, back) {
			return back
		}
	}
	if i := slices.IndexFunc(ms, Move.IsPass); i >= 0 && rng.Float64() < rp.pPass {
		return ms[i]
	}
	if rng.Float64() < rp.pTake {
		p := g.Position()
		for _, i := range rng.Perm(len(ms)) {
			if p.PieceAt(ms[i].To()) != NoPiece && !ms[i].IsPass() {
				return ms[i]
			}
		}
	}
	return ms[rng.IntN(len(ms))]
}

func TestRandomGamesAgreeWithReference(t *testing.T) {
	games := 150
	if testing.Short() {
		games = 40
	}
	if n, err := strconv.Atoi(os.Getenv("RULES_RANDOM_GAMES")); err == nil {
		games = n
	}
	for _, v := range []Variant{Janggi, Xiangqi} {
		t.Run(v.String(), func(t *testing.T) {
			seen := map[Method]int{}
			for i := 0; i < games; i++ {
				rng := rand.New(rand.NewPCG(uint64(v), uint64(i)))
				rp := &randomPolicy{rng: rng, pMate: rng.Float64(), pPass: rng.Float64() * 0.3, pBack: rng.Float64() * 0.9, pTake: rng.Float64() * 0.5, pCheck: rng.Float64()}
				g := mustGame(t, v, "")
				for !g.Outcome().Ended {
					p := g.Position()
					m := rp.choose(g)
					info, err := g.Play(m)
					if err != nil {
						t.Fatalf("game %d: %v", i, err)
					}
					if back, err := ParseNotation(p, info.Notation); err != nil || back != m {
						t.Fatalf("game %d ply %d: notation %q of %v reads back as %v, %v", i, info.Ply, info.Notation, m, back, err)
					}
				}
				got := g.Outcome()
				want, ply, sure := refAdjudicate(t, v, g.Start(), g.Moves())
				if !sure && got.Method == PerpetualChase && got.Winner != Draw {
					want.Winner, want.Method = got.Winner, got.Method
				}
				if got != want || ply != g.Plies() {
					t.Fatalf("game %d (%v): outcome %+v after %d plies, reference %+v after %d", i, g.Moves(), got, g.Plies(), want, ply)
				}
				seen[got.Method]++
			}
			t.Logf("%v endings over %d games: %v", v, games, seen)
		})
	}
}
