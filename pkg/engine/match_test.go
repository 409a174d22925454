package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/palacehq/palace/pkg/rules"
)

// scripted plays the first legal move and reports the score its script
// gives for the ply it moves at.
type scripted struct {
	name  string
	score func(ply int) (int, bool)
}

func (s scripted) Name() string                                 { return s.name }
func (s scripted) NewGame(context.Context, rules.Variant) error { return nil }

func (s scripted) Move(_ context.Context, v rules.Variant, startFEN string, moves []rules.Move) (Reply, error) {
	g, err := rules.NewGame(v, startFEN)
	if err != nil {
		return Reply{}, err
	}
	key := func(p *rules.Position) string { f := strings.Fields(p.FEN()); return f[0] + f[1] }
	seen := map[string]bool{key(g.Position()): true}
	for _, m := range moves {
		if _, err := g.Play(m); err != nil {
			return Reply{}, err
		}
		seen[key(g.Position())] = true
	}
	// A quiet move to a new position keeps the game open for the script:
	// no capture, no repetition.
	p := g.Position()
	legal := p.LegalMoves(nil)
	m := legal[0]
	for _, c := range legal {
		next := p.Clone()
		next.Make(c)
		if !c.IsPass() && p.PieceAt(c.To()) == rules.NoPiece && !seen[key(next)] {
			m = c
			break
		}
	}
	score, ok := s.score(len(moves))
	return Reply{Move: m, Score: score, Scored: ok}, nil
}

func TestMatchAdjudication(t *testing.T) {
	adj := Adjudication{ResignScore: 500, ResignMoves: 3, DrawScore: 10, DrawMoves: 4, DrawAfter: 20}
	const from = 10 // the scripts' scores apply from this ply on
	side := func(ply int) rules.Side { return rules.Side(ply % 2) }
	lostFor := func(loser rules.Side) func(int) (int, bool) {
		return func(ply int) (int, bool) {
			switch {
			case ply < from:
				return 0, true
			case side(ply) == loser:
				return -900, true
			}
			return 900, true
		}
	}
	tests := []struct {
		name      string
		v         rules.Variant
		a, b      func(int) (int, bool)
		wantPly   int // the game ends after this many plies
		wantScore float64
		wantNote  string
	}{
		// Both agree that the second player (b, moving at odd plies) is
		// lost from ply 10: its moves at plies 11, 13 and 15 follow a's
		// "won", so it resigns after the 16th ply. a, moving at even
		// plies, first follows b's "won" at ply 12, and resigns at 17.
		{"resign", rules.Xiangqi, lostFor(1), lostFor(1), 16, 1, "palace-b resigns"},
		{"resign janggi", rules.Janggi, lostFor(0), lostFor(0), 17, 0, "palace-a resigns"},
		// Level scores draw, in Xiangqi and only after DrawAfter.
		{"level xiangqi", rules.Xiangqi, func(int) (int, bool) { return 3, true }, func(int) (int, bool) { return -3, true }, 20, 0.5, "level"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := scripted{"palace-a", tc.a}, scripted{"palace-b", tc.b}
			res, err := Match(context.Background(), a, b, 1, tc.v, nil, adj, nil)
			if err != nil {
				t.Fatal(err)
			}
			rec := res.Records[0]
			if len(rec.Moves) != tc.wantPly || rec.ScoreA != tc.wantScore || !strings.Contains(rec.Note, tc.wantNote) {
				t.Errorf("ended after %d plies, score %v, note %q (%v); want %d plies, score %v, note with %q",
					len(rec.Moves), rec.ScoreA, rec.Note, rec.Outcome, tc.wantPly, tc.wantScore, tc.wantNote)
			}
		})
	}
	// Without scores, without agreement, or in Janggi a level game, the
	// game is not adjudicated.
	level := func(int) (int, bool) { return 0, true }
	for _, tc := range []struct {
		name string
		v    rules.Variant
		a, b func(int) (int, bool)
	}{
		{"unscored", rules.Xiangqi, func(int) (int, bool) { return 0, false }, func(int) (int, bool) { return 0, false }},
		{"no agreement", rules.Xiangqi, func(int) (int, bool) { return 200, true }, lostFor(1)},
		{"level janggi", rules.Janggi, level, level},
	} {
		res, err := Match(context.Background(), scripted{"palace-a", tc.a}, scripted{"palace-b", tc.b}, 1, tc.v, nil, adj, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rec := res.Records[0]; strings.Contains(rec.Note, "adjudicated") {
			t.Errorf("%s: adjudicated after %d plies: %s", tc.name, len(rec.Moves), rec.Note)
		} else {
			t.Logf("%s: %v after %d plies %s", tc.name, rec.Outcome, len(rec.Moves), rec.Note)
		}
	}
}

// A match whose context ends stops at once: the game in progress, played
// on with moves from cut-short searches, must not be counted.
func TestMatchStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls int
	stopper := scripted{"palace-stopper", func(int) (int, bool) {
		calls++
		if calls == 5 {
			cancel()
		}
		return 0, true
	}}
	res, err := Match(ctx, stopper, scripted{"palace-b", func(int) (int, bool) { return 0, true }}, 10, rules.Xiangqi, nil, Adjudication{}, nil)
	if err == nil || res.Games != 0 || calls != 5 {
		t.Fatalf("after cancel: %d games, %d moves asked, err %v; want 0 games, 5 moves and the context's error", res.Games, calls, err)
	}
}
