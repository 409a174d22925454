package ai_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/palacehq/palace/pkg/apptest"
	aiv1 "github.com/palacehq/palace/pkg/gen/palace/ai/v1"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/services/ai"
)

func searchClient(t *testing.T, edit ...func(*ai.Config)) aiv1.AIServiceClient {
	t.Helper()
	cfg := aiConfig(redistest.Prefix(t), 0)
	for _, e := range edit {
		e(&cfg)
	}
	return aiv1.NewAIServiceClient(apptest.Start(t, redistest.Addr(t), ai.Bind(cfg)))
}

func kindOf(v rules.Variant) commonv1.GameKind {
	if v == rules.Janggi {
		return commonv1.GameKind_GAME_KIND_JANGGI
	}
	return commonv1.GameKind_GAME_KIND_XIANGQI
}

func movesPB(ms []rules.Move) []*commonv1.Move {
	var out []*commonv1.Move
	for _, m := range ms {
		out = append(out, &commonv1.Move{Coordinate: m.String()})
	}
	return out
}

// TestAMateInCountedASecondOccurrenceAsTheEnd: Cho (a soldier and a guard
// against a bare general, 5 points to 1.5) is to move after 138 plies. The
// answer claimed a win in 5 plies (mate_in 5) along its PV, which only
// brought a position back a second time: by the rules (third occurrence)
// the game goes on, and the end is a cycle later.
func TestAMateInCountedASecondOccurrenceAsTheEnd(t *testing.T) {
	c := searchClient(t)
	ms := strings.Fields("h1i3 d10d9 b1a3 g7g6 c4d4 a7a6 i3h1 e9f8 d1d2 e7d7 a4b4 a10a9 b4b5 a6a5 b5a5 a9a5 d4d5 a5a3 g4g5 a3a1 g5g6 d7d6 d5d6 i10i9 i1i3 a1b1 h1g3 b1b3 h3b3 c7d7 d6d7 i7h7 e2e1 i9i4 i3i4 h8h1 g3h1 b8g8 d7e7 g8g1 f1e2 g1c1 i4h4 c10e7 h4h7 c1h1 h7h10 d9d10 h10h1 f10f9 e2f2 e7g4 h1h8 f8e9 d2d3 b10d9 b3e3 g10e7 e3e7 g4e7 e1d1 e7h9 d1d2 d9c7 g6h6 f9f8 h8f8 e9f8 e4e5 f8f9 d2d1 f9f8 f2e2 c7d5 e5d5 h9f6 e2e1 f6d3 d5d6 f8f9 d1e2 d10d9 e2d3 f9f8 d3e2 f8e8 e2d3 e8f8 e1e2 f8e9 e2e3 d9d8 e3e2 e9e8 d6c6 e8e9 e2d2 d8d9 c6d6 e9e8 d6e6 e8e9 h6h7 e9e10 d2e2 e10f10 d3e3 f10e10 h7h8 e10d10 e6e7 d10e10 e2f2 e10e9 h8g8 d9d10 g8f8 e9f8 f2f3 d10d9 f3e2 d9d8 e2f2 d8e9 f2f3 f8f9 f3f2 e9e8 e7e8 f9f10 e3d3 f10f9 e8e9 f9f8 e9d9 f8f9 d9d10 f9f8")
	g, _ := rules.NewGame(rules.Janggi, "")
	var pb []*commonv1.Move
	for _, s := range ms {
		m, _ := rules.ParseMove(s)
		if _, err := g.Play(m); err != nil {
			t.Fatal(err)
		}
		pb = append(pb, &commonv1.Move{Coordinate: s})
	}
	r, err := c.BestMove(context.Background(), &aiv1.BestMoveRequest{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Moves: pb, Limits: &aiv1.SearchLimits{Depth: 5}})
	if err != nil {
		t.Fatal(err)
	}
	mi := int(r.GetMateIn())
	if mi == 0 {
		return
	}
	// A line ending in a position's second occurrence ends the game at
	// its third: the cycle played again.
	line := r.GetPv()
	if k := mi - len(line); k > 0 && k < len(line) {
		line = append(line, line[len(line)-k:]...)
	}
	if len(line) < mi {
		t.Fatalf("mate_in %d with a pv of %d plies: %v", mi, len(r.GetPv()), r.GetPv())
	}
	for _, pm := range line[:mi] {
		m, _ := rules.ParseMove(pm.GetCoordinate())
		if _, err := g.Play(m); err != nil {
			t.Fatal(err)
		}
	}
	if o := g.Outcome(); !o.Ended || o.Winner != rules.FirstWins {
		t.Fatalf("answer %v: mate_in %d (score %d) along pv %v, but after those %d plies the game is %v", r.GetMove().GetCoordinate(), mi, r.GetScoreCp(), r.GetPv(), mi, o)
	}
}

// TestAnAnalysisEndedOnAnIterationCutShort: Analyze sends one message per
// completed depth, then the best move. Cut by its node limit, the search
// ended with a best whose depth was one more than any streamed, often
// with another move or score: an iteration that never completed.
func TestAnAnalysisEndedOnAnIterationCutShort(t *testing.T) {
	c := searchClient(t)
	rng := rand.New(rand.NewPCG(1, 2))
	diff := 0
	for gi := range 30 {
		v := []rules.Variant{rules.Xiangqi, rules.Janggi}[gi%2]
		g, _ := rules.NewGame(v, "")
		for range rng.IntN(40) {
			if g.Outcome().Ended {
				break
			}
			l := g.LegalMoves()
			m := l[rng.IntN(len(l))]
			if m.IsPass() {
				continue
			}
			g.Play(m)
		}
		if g.Outcome().Ended {
			continue
		}
		infos, best := analyze(t, c, &aiv1.AnalyzeRequest{Kind: kindOf(v), Moves: movesPB(g.Moves()), Limits: &aiv1.SearchLimits{Nodes: uint64(5000 + rng.IntN(60000))}})
		last := infos[len(infos)-1]
		if best.GetDepth() != last.GetDepth() || best.GetMove().GetCoordinate() != last.GetPv()[0].GetCoordinate() {
			diff++
			t.Errorf("%v: last info depth %d %v score %d; best depth %d %v score %d", v, last.GetDepth(), last.GetPv()[0], last.GetScoreCp(), best.GetDepth(), best.GetMove(), best.GetScoreCp())
		}
	}
	if diff > 0 {
		t.Errorf("%d of the analyses ended with a best that is not the last depth streamed", diff)
	}
}

// TestAForcedMoveWasSearchedOnePlyWhateverTheLimits: Black's only move is
// e10f10, after which b1b10 mates (mate in 2 plies against the mover).
// Asked for depth 6, Analyze stopped at depth 1 and reported no mate
// (mate_in 0, a centipawn score), as did BestMove with depth 6.
func TestAForcedMoveWasSearchedOnePlyWhateverTheLimits(t *testing.T) {
	c := searchClient(t)
	const fen = "4k4/R8/9/9/9/9/9/9/9/1R1K5 b - - 0 1"
	infos, best := analyze(t, c, &aiv1.AnalyzeRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Start: &commonv1.Position{Fen: fen}, Limits: &aiv1.SearchLimits{Depth: 6}})
	var depths []uint32
	for _, i := range infos {
		depths = append(depths, i.GetDepth())
	}
	if best.GetMateIn() != -2 {
		t.Errorf("Analyze depth 6: depths %v, best %v (mate_in %d, score %d); want mate_in -2", depths, best.GetMove().GetCoordinate(), best.GetMateIn(), best.GetScoreCp())
	}
	r, err := c.BestMove(context.Background(), &aiv1.BestMoveRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Start: &commonv1.Position{Fen: fen}, Limits: &aiv1.SearchLimits{Depth: 6}})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetMateIn() != -2 {
		t.Errorf("BestMove depth 6: %v at depth %d (mate_in %d, score %d); want mate_in -2", r.GetMove().GetCoordinate(), r.GetDepth(), r.GetMateIn(), r.GetScoreCp())
	}
}

// analyze runs req to its end: the depths' messages, then the best move.
func analyze(t *testing.T, c aiv1.AIServiceClient, req *aiv1.AnalyzeRequest) ([]*aiv1.SearchInfo, *aiv1.BestMoveResponse) {
	t.Helper()
	st, err := c.Analyze(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var infos []*aiv1.SearchInfo
	var best *aiv1.BestMoveResponse
	for {
		msg, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if msg.GetInfo() != nil {
			infos = append(infos, msg.GetInfo())
		} else {
			best = msg.GetBest()
		}
	}
	if len(infos) == 0 || best == nil {
		t.Fatalf("analysis of %v: %d depths, best %v", req, len(infos), best)
	}
	return infos, best
}

// TestBestMoveClaimedALossWhereRedForcedADraw: Xiangqi, Red's rook
// and general against Black's two chariots, which mate whenever Red stops
// checking. From the start position Q (Ra10, Ke9, Red to move) the game
// went a10a8 (quiet) e9e10. Red now forces a draw: a8a10 e10e9 a10a9 e9e10
// a9a10 e10e9, every Black reply forced, brings Q back a third time with
// Red's quiet a10a8 inside the repetition's window, so rules.Game calls it
// a plain repetition. BestMove (depth 8) answered mate_in -9, a forced
// loss, and played another move.
func TestBestMoveClaimedALossWhereRedForcedADraw(t *testing.T) {
	c := searchClient(t)
	const fen = "R8/4k4/4p4/9/9/9/9/6r2/7r1/3K5 w - - 0 1"
	g, err := rules.NewGame(rules.Xiangqi, fen)
	if err != nil {
		t.Fatal(err)
	}
	var hist []rules.Move
	for _, s := range []string{"a10a8", "e9e10"} {
		m, _ := rules.ParseMove(s)
		if _, err := g.Play(m); err != nil {
			t.Fatal(err)
		}
		hist = append(hist, m)
	}
	d := g.Clone()
	for i, s := range []string{"a8a10", "e10e9", "a10a9", "e9e10", "a9a10", "e10e9"} {
		m, _ := rules.ParseMove(s)
		if l := d.LegalMoves(); i%2 == 1 && (len(l) != 1 || l[0] != m) {
			t.Fatalf("Black's reply %v is not forced: %v", m, l)
		}
		if _, err := d.Play(m); err != nil {
			t.Fatal(err)
		}
	}
	if o := d.Outcome(); !o.Ended || o.Winner != rules.Draw {
		t.Fatalf("rules: %v, want a draw", o)
	}
	r, err := c.BestMove(context.Background(), &aiv1.BestMoveRequest{
		Kind:   commonv1.GameKind_GAME_KIND_XIANGQI,
		Start:  &commonv1.Position{Fen: fen},
		Moves:  movesPB(hist),
		Limits: &aiv1.SearchLimits{Depth: 8},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetMateIn() < 0 {
		t.Errorf("BestMove: %v mate_in %d score %d pv %v; Red forces a draw with a8a10 (rules: %v)", r.GetMove().GetCoordinate(), r.GetMateIn(), r.GetScoreCp(), r.GetPv(), d.Outcome())
	}
}
