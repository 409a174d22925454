package uci

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/engine"
	"github.com/palacehq/palace/pkg/rules"
)

// conversation drives Run over pipes: send writes a command, expect reads
// lines until one starts with a prefix.
type conversation struct {
	t     *testing.T
	in    *io.PipeWriter
	lines chan string
	done  chan error
}

func start(t *testing.T) *conversation {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &conversation{t: t, in: inW, lines: make(chan string, 1024), done: make(chan error, 1)}
	go func() {
		c.done <- Run(context.Background(), inR, outW)
		outW.Close()
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after the end of input")
		}
	})
	return c
}

func (c *conversation) send(cmd string) {
	c.t.Helper()
	if _, err := fmt.Fprintln(c.in, cmd); err != nil {
		c.t.Fatalf("send %q: %v", cmd, err)
	}
}

// expect returns the first line starting with prefix and the lines before it.
func (c *conversation) expect(prefix string) (string, []string) {
	c.t.Helper()
	var before []string
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				c.t.Fatalf("output ended while waiting for %q (got %q)", prefix, before)
			}
			if strings.HasPrefix(l, prefix) {
				return l, before
			}
			before = append(before, l)
		case <-timeout:
			c.t.Fatalf("no %q after %q", prefix, before)
		}
	}
}

// bestMove parses "bestmove X" and checks X is legal in the position
// after moves from fen.
func bestMoveLegal(t *testing.T, line string, v rules.Variant, fen string, moves ...string) rules.Move {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "bestmove" {
		t.Fatalf("bad bestmove line %q", line)
	}
	p, err := rules.ParseFEN(v, fen)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range moves {
		m, err := rules.ParseMove(s)
		if err != nil {
			t.Fatal(err)
		}
		p.Make(m)
	}
	m, err := rules.ParseMove(f[1])
	if err != nil {
		t.Fatalf("bestmove %q: %v", f[1], err)
	}
	if !slices.Contains(p.LegalMoves(nil), m) {
		t.Fatalf("bestmove %v is illegal in %s", m, p.FEN())
	}
	return m
}

func TestHandshake(t *testing.T) {
	c := start(t)
	c.send("uci")
	_, before := c.expect("uciok")
	for _, want := range []string{
		"id name Palace",
		"option name UCI_Variant type combo default xiangqi var janggi var xiangqi",
		"option name Hash type spin",
		"option name Threads type spin default 1 min 1 max 1",
	} {
		if !slices.ContainsFunc(before, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("no %q in %q", want, before)
		}
	}
	c.send("isready")
	c.expect("readyok")
	c.send("quit")
	if err := <-c.done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	c.done <- nil // for the cleanup
}

func TestGoDepth(t *testing.T) {
	for _, tc := range []struct {
		name    string
		variant string
		v       rules.Variant
	}{
		{"xiangqi", "xiangqi", rules.Xiangqi},
		{"janggi", "janggi", rules.Janggi},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := start(t)
			c.send("uci")
			c.expect("uciok")
			c.send("setoption name UCI_Variant value " + tc.variant)
			c.send("setoption name Hash value 8")
			c.send("ucinewgame")
			c.send("position startpos moves b1c3")
			c.send("go depth 4")
			line, before := c.expect("bestmove")
			bestMoveLegal(t, line, tc.v, rules.StartFEN(tc.v), "b1c3")
			if len(before) == 0 || !strings.HasPrefix(before[len(before)-1], "info depth 4 ") {
				t.Errorf("want info lines up to depth 4, got %q", before)
			}
			for _, l := range before {
				for _, field := range []string{" seldepth ", " score ", " nodes ", " nps ", " time ", " pv "} {
					if !strings.Contains(l, field) {
						t.Errorf("info line %q lacks %q", l, field)
					}
				}
			}
		})
	}
}

func TestJanggiPassInMoves(t *testing.T) {
	c := start(t)
	c.send("setoption name UCI_Variant value janggi")
	// Cho passes, Han moves, Cho passes again.
	c.send("position startpos moves e2e2 b10c8 e2e2")
	c.send("d")
	line, _ := c.expect("info string fen")
	if !strings.Contains(line, " b ") {
		t.Errorf("after three plies Han should move: %q", line)
	}
	c.send("go nodes 3000")
	line, _ = c.expect("bestmove")
	bestMoveLegal(t, line, rules.Janggi, rules.StartFEN(rules.Janggi), "e2e2", "b10c8", "e2e2")
}

func TestJanggiPassAsBestMove(t *testing.T) {
	// Han just passed and Cho leads on points: passing back wins.
	c := start(t)
	c.send("setoption name UCI_Variant value janggi")
	c.send("position fen 3a1a3/4k4/9/9/9/9/9/9/9/R2K5 b - - 0 1 moves e9e9")
	c.send("go depth 3")
	line, before := c.expect("bestmove")
	if line != "bestmove d1d1" {
		t.Errorf("got %q, want bestmove d1d1", line)
	}
	if len(before) == 0 || !strings.Contains(before[len(before)-1], "score mate 1 ") {
		t.Errorf("want score mate 1, got %q", before)
	}
}

func TestGoInfiniteStop(t *testing.T) {
	c := start(t)
	c.send("position startpos")
	c.send("go infinite")
	time.Sleep(200 * time.Millisecond)
	c.send("isready")
	_, before := c.expect("readyok")
	if slices.ContainsFunc(before, func(l string) bool { return strings.HasPrefix(l, "bestmove") }) {
		t.Fatalf("bestmove before stop: %q", before)
	}
	c.send("stop")
	line, _ := c.expect("bestmove")
	bestMoveLegal(t, line, rules.Xiangqi, rules.StartFEN(rules.Xiangqi))
}

func TestGoClock(t *testing.T) {
	c := start(t)
	c.send("position startpos moves h3e3")
	c.send("go wtime 3000 btime 3000 winc 0 binc 0")
	line, _ := c.expect("bestmove")
	bestMoveLegal(t, line, rules.Xiangqi, rules.StartFEN(rules.Xiangqi), "h3e3")
}

func TestBadPosition(t *testing.T) {
	c := start(t)
	c.send("position fen not-a-fen w")
	line, _ := c.expect("info string")
	if !strings.Contains(line, "error") {
		t.Errorf("got %q", line)
	}
	c.send("position startpos moves h3e3 h3e3")
	line, _ = c.expect("info string")
	if !strings.Contains(line, "move 2") {
		t.Errorf("got %q, want the second move reported", line)
	}
	c.send("foo bar") // unknown: ignored
	c.send("isready")
	c.expect("readyok")
	// The legal prefix stays: Black is to move.
	c.send("go depth 2")
	line, _ = c.expect("bestmove")
	bestMoveLegal(t, line, rules.Xiangqi, rules.StartFEN(rules.Xiangqi), "h3e3")
}

func TestNoLegalMove(t *testing.T) {
	c := start(t)
	c.send("position fen 3k5/7P1/3R4P/9/9/9/9/9/9/4K4 b - - 1 1")
	c.send("go depth 3")
	line, _ := c.expect("bestmove")
	if line != "bestmove (none)" {
		t.Fatalf("got %q", line)
	}
}

func TestEndOfInputFinishesSearch(t *testing.T) {
	var out strings.Builder
	in := strings.NewReader("position startpos\ngo depth 3\n")
	if err := Run(context.Background(), in, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "bestmove ") {
		t.Fatalf("no bestmove in %q", out.String())
	}
}

// TestClient plays the client against Run over pipes, as it would against
// an external engine binary.
func TestClient(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), inR, outW)
		outW.Close()
	}()
	ctx := context.Background()
	c, err := NewClient(ctx, outR, inW, func() error { inW.Close(); return <-done })
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "Palace" {
		t.Errorf("Name = %q", c.Name())
	}
	c.Go = GoParams{Nodes: 2000}
	for _, v := range []rules.Variant{rules.Janggi, rules.Xiangqi} {
		if err := c.NewGame(ctx, v); err != nil {
			t.Fatal(err)
		}
		moves := []rules.Move{}
		if v == rules.Janggi {
			// Han passed and Cho leads: the engine passes back.
			fen := "3a1a3/4k4/9/9/9/9/9/9/9/R2K5 b - - 0 1"
			pass, _ := rules.ParseMove("e9e9")
			r, err := c.Move(ctx, v, fen, []rules.Move{pass})
			if err != nil || !r.Move.IsPass() || !r.Scored {
				t.Fatalf("janggi: %+v, %v; want the pass, scored", r, err)
			}
		}
		r, err := c.Move(ctx, v, rules.StartFEN(v), moves)
		if err != nil {
			t.Fatal(err)
		}
		m := r.Move
		p, _ := rules.ParseFEN(v, rules.StartFEN(v))
		if !slices.Contains(p.LegalMoves(nil), m) {
			t.Fatalf("%v: illegal %v", v, m)
		}
	}

	// A short match: the client (Palace over UCI) against a built-in level.
	c.Go = GoParams{Depth: 1}
	lp := engine.NewLevelPlayer(1, 3, 1)
	res, err := engine.Match(ctx, c, lp, 2, rules.Janggi, engine.RandomOpenings(rules.Janggi, 1, 2, 1), engine.Adjudication{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Games != 2 {
		t.Fatalf("match: %+v", res)
	}
	for _, rec := range res.Records {
		if rec.Note != "" {
			t.Errorf("game %d: %s", rec.Index, rec.Note)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestInfoScore(t *testing.T) {
	for _, tc := range []struct {
		line  string
		want  int
		found bool
	}{
		{"info depth 5 score cp 37 nodes 100 pv h2e2", 37, true},
		// Only exact scores of the first PV (no multipv: the first).
		{"info depth 5 seldepth 7 score cp -120 upperbound", 0, false},
		{"info depth 5 score cp 30 lowerbound nodes 100 pv h2e2", 0, false},
		{"info depth 8 multipv 1 score cp 250 pv h3e3", 250, true},
		{"info depth 8 multipv 2 score cp -400 pv a1a2", 0, false},
		{"info depth 8 score cp -400 multipv 2 pv a1a2", 0, false},
		{"info multipv 3 score mate 2", 0, false},
		{"info multipv x score cp 1", 0, false},
		{"info score cp 5 string multipv 2 upperbound", 5, true},
		{"info score mate 1 pv a1a9", engine.MateScore - 1, true},
		{"info score mate 2", engine.MateScore - 3, true},
		{"info score mate -2", -engine.MateScore + 4, true},
		{"info score mate 15500", 1, true},
		{"info score mate 15501", 0, false},
		{"info score mate -15499", -2, true},
		{"info score mate -15500", 0, false},
		{"info score mate 4611686018427387904", 0, false},
		{"info score mate -9223372036854775808", 0, false},
		{"info depth 5 nodes 100", 0, false},
		{"info string score cp 5", 0, false},
		{"info score cp", 0, false},
		{"info score lowerbound 12", 0, false},
		{"bestmove h2e2", 0, false},
		{"", 0, false},
	} {
		got, ok := infoScore(tc.line)
		if got != tc.want || ok != tc.found {
			t.Errorf("infoScore(%q) = %d, %v; want %d, %v", tc.line, got, ok, tc.want, tc.found)
		}
	}
}

// TestSkillLevelLimitsTheSearch: a GUI that sets a Skill Level gets that
// level's search (level 1: one ply), not full strength, whatever depth
// it asks for.
func TestSkillLevelLimitsTheSearch(t *testing.T) {
	c := start(t)
	c.send("uci")
	c.expect("uciok")
	c.send("setoption name Skill Level value 1")
	c.send("position startpos")
	c.send("go depth 4")
	_, before := c.expect("bestmove")
	for _, l := range before {
		if strings.HasPrefix(l, "info depth ") && !strings.HasPrefix(l, "info depth 1 ") {
			t.Fatalf("level 1 searched beyond one ply: %q", before)
		}
	}
}

// TestGoMovetimeIsKept: "go movetime" answers about then, not later. The
// margin, as long again, is for a machine busy with other tests.
func TestGoMovetimeIsKept(t *testing.T) {
	c := start(t)
	c.send("uci")
	c.expect("uciok")
	c.send("position startpos")
	const moveTime = 400 * time.Millisecond
	begin := time.Now()
	c.send(fmt.Sprintf("go movetime %d", moveTime.Milliseconds()))
	c.expect("bestmove")
	if el := time.Since(begin); el > 2*moveTime {
		t.Fatalf("go movetime %v answered after %v", moveTime, el)
	}
}

// TestGoInfiniteWaitsForStopOnceTheSearchEnds: UCI sends no bestmove
// before stop in infinite mode, even when the search ends first (Skill
// Level 1 searches one ply): a GUI would take it for the answer to a
// later go.
func TestGoInfiniteWaitsForStopOnceTheSearchEnds(t *testing.T) {
	c := start(t)
	c.send("setoption name Skill Level value 1")
	c.send("position startpos")
	c.send("go infinite")
	time.Sleep(100 * time.Millisecond)
	c.send("isready")
	_, before := c.expect("readyok")
	if slices.ContainsFunc(before, func(l string) bool { return strings.HasPrefix(l, "bestmove") }) {
		t.Fatalf("bestmove before stop: %q", before)
	}
	c.send("stop")
	line, _ := c.expect("bestmove")
	bestMoveLegal(t, line, rules.Xiangqi, rules.StartFEN(rules.Xiangqi))
}

// TestJanggiVariantNamesAndPassSpellings: the Janggi variants of other
// tools (janggimodern, janggicasual...) play Janggi, and a pass written
// 0000, as some tools write it, is a pass.
func TestJanggiVariantNamesAndPassSpellings(t *testing.T) {
	c := start(t)
	c.send("setoption name UCI_Variant value janggimodern")
	c.send("position startpos moves 0000 b10c8 0000")
	c.send("d")
	line, before := c.expect("info string fen")
	if slices.ContainsFunc(before, func(l string) bool { return strings.Contains(l, "error") }) || !strings.Contains(line, " b ") {
		t.Fatalf("after Cho's two passes, Han should move: %q after %q", line, before)
	}
	c.send("go nodes 3000")
	line, _ = c.expect("bestmove")
	bestMoveLegal(t, line, rules.Janggi, rules.StartFEN(rules.Janggi), "e2e2", "b10c8", "e2e2")
}

// TestGoMateEnds: "go mate 1" once searched until stop, the mate found
// at once but never answered, a GUI waiting for ever.
func TestGoMateEnds(t *testing.T) {
	c := start(t)
	c.send("uci")
	c.expect("uciok")
	c.send("position fen 4k4/R8/9/9/9/9/9/9/9/1R1K5 w - - 0 1")
	c.send("go mate 1")
	line, _ := c.expect("bestmove")
	mv := bestMoveLegal(t, line, rules.Xiangqi, "4k4/R8/9/9/9/9/9/9/9/1R1K5 w - - 0 1")
	g, err := rules.NewGame(rules.Xiangqi, "4k4/R8/9/9/9/9/9/9/9/1R1K5 w - - 0 1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Play(mv); err != nil || !g.Outcome().Ended {
		t.Errorf("go mate 1: %s does not mate (%v, %+v)", line, err, g.Outcome())
	}
}

// TestSearchMovesIsSaidToBeIgnored: a restriction of the root moves is
// not supported, and a GUI asking for one is told so, then answered.
func TestSearchMovesIsSaidToBeIgnored(t *testing.T) {
	c := start(t)
	c.send("position startpos")
	c.send("go depth 2 searchmoves h3e3 h3g3")
	line, before := c.expect("bestmove")
	bestMoveLegal(t, line, rules.Xiangqi, rules.StartFEN(rules.Xiangqi))
	if !slices.ContainsFunc(before, func(l string) bool { return strings.HasPrefix(l, "info string searchmoves is not supported") }) {
		t.Errorf("go ... searchmoves: %q before the answer; want it said that searchmoves is not supported", before)
	}
}
