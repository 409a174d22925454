package game_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/services/game/gametest"
)

// Whole games from the start position to every ending the rules decide on
// a move: the ending is committed with the move that makes it, so the
// move's own answer already carries it, and nothing is accepted after.
func TestFullGamesToEveryRulesEndingThroughTheAPI(t *testing.T) {
	env := gametest.Start(t, nil)
	janggi := &commonv1.Position{Fen: rules.StartFEN(rules.Janggi)}
	repeat := func(moves string, n int) string { return strings.TrimSpace(strings.Repeat(moves+" ", n)) }
	tests := []struct {
		name       string
		kind       commonv1.GameKind
		moves      string
		wantWinner commonv1.Winner
		wantMethod commonv1.EndMethod
	}{
		// Han's e9f8 faces the generals, Cho's a1a7 keeps them facing and
		// is the first capture.
		{"janggi bikjang", commonv1.GameKind_GAME_KIND_JANGGI, "e2f2 c7c6 a4b4 e9f8 a1a7", commonv1.Winner_WINNER_FIRST, commonv1.EndMethod_END_METHOD_BIKJANG},
		{"janggi repetition", commonv1.GameKind_GAME_KIND_JANGGI, repeat("i1i2 e9d9 i2i1 d9e9", 2), commonv1.Winner_WINNER_SECOND, commonv1.EndMethod_END_METHOD_REPETITION},
		{"janggi perpetual check", commonv1.GameKind_GAME_KIND_JANGGI, "e2f3 e7d7 h3e3 d7e7 e3e5 e7d7 e5e3 d7e7 e3e6 e7d7 e6e3", commonv1.Winner_WINNER_SECOND, commonv1.EndMethod_END_METHOD_PERPETUAL_CHECK},
		{"janggi checkmate", commonv1.GameKind_GAME_KIND_JANGGI, "e2d2 a10a9 d2d2 a9d9 d2e2 d9d2 e2f3 d2d3 b3e3 d3f1", commonv1.Winner_WINNER_SECOND, commonv1.EndMethod_END_METHOD_CHECKMATE},
		{"xiangqi repetition", commonv1.GameKind_GAME_KIND_XIANGQI, repeat("b1c3 a10a9 c3b1 a9a10", 2), commonv1.Winner_WINNER_DRAW, commonv1.EndMethod_END_METHOD_REPETITION},
		{"xiangqi perpetual check", commonv1.GameKind_GAME_KIND_XIANGQI, "b3b10 b8b9 h3h10 b9b8 b10d10 b8b9 d10a10 e10e9 a10a9 e9e10 a9a10 e10e9 a10a9 e9e10 a9a10", commonv1.Winner_WINNER_SECOND, commonv1.EndMethod_END_METHOD_PERPETUAL_CHECK},
		{"xiangqi perpetual chase", commonv1.GameKind_GAME_KIND_XIANGQI, "e1e2 b8b5 h3h5 b5c5 b3h3 c5g5 g1i3 g5c5 i3g5 g7g6 g5e3 h8h9 e3g5 h9h8 g5e3 h8h9 e3g5 h9h8", commonv1.Winner_WINNER_SECOND, commonv1.EndMethod_END_METHOD_PERPETUAL_CHASE},
		{"xiangqi stalemate", commonv1.GameKind_GAME_KIND_XIANGQI, "h3h6 b8b1 a1b1 h8h1 i1h1 h10g8 b1a1 a10a8 h6c6 c7c6 b3i3 c6c5 i3i7 g8i7 c4c5 e7e6 h1h9 i7h9 a1a3 a8i8 a3b3 i8i4 b3b10 i4g4 b10c10 g4g1 c10d10 e10d10 e4e5 g1f1 e1f1 e6e5 d1e2 g10e8 c1e3 i10i9 c5c6 e8c6 e3c1 i9i8 a4a5 i8i9 c1e3 e5e4 a5a6 e4e3 a6a7 e3e2 a7a8 c6a8", commonv1.Winner_WINNER_SECOND, commonv1.EndMethod_END_METHOD_STALEMATE},
		{"xiangqi insufficient material", commonv1.GameKind_GAME_KIND_XIANGQI, "b3b10 h8h1 i1h1 a10b10 g1i3 b10a10 g4g5 b8a8 c4c5 a8b8 c5c6 c7c6 h3g3 b8b10 h1h10 i10h10 g3g7 h10i10 g7a7 a10a7 i4i5 a7a4 a1a4 e7e6 a4a7 f10e9 a7i7 i10i7 e4e5 i7i5 e5e6 i5g5 i3g5 b10b2 e6e7 b2b8 e1e2 b8e8 e7e8 g10e8 e2e1 c10a8 d1e2 e9f8 e2d1 e10e9 d1e2 e9e10 c1a3 f8e9 g5e3 e9f10 b1d2 f10e9 d2e4 e8g6 e4c5 c6c5 e3c5", commonv1.Winner_WINNER_DRAW, commonv1.EndMethod_END_METHOD_INSUFFICIENT_MATERIAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &gamev1.CreateGameRequest{Kind: tt.kind}
			if tt.kind == commonv1.GameKind_GAME_KIND_JANGGI {
				req.Start = janggi
			}
			tb := create(t, env, req)
			moves := strings.Fields(tt.moves)
			for _, m := range moves[:len(moves)-1] {
				if g := tb.move(t, m).GetGame(); g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
					t.Fatalf("after %s: status %v, want the game going on", m, g.GetStatus())
				}
			}
			last := tb.move(t, moves[len(moves)-1])
			wantEnd(t, last.GetGame(), tt.wantWinner, tt.wantMethod)
			wantEnd(t, tb.get(t), tt.wantWinner, tt.wantMethod)
			_, err := env.Client.Resign(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.ResignRequest{GameId: tb.id, RequestId: rid()})
			wantCode(t, err, codes.FailedPrecondition)
		})
	}
}

// TestMoveLimitThroughTheAPI plays both kinds to their move limit (Janggi's
// plies, Xiangqi's plies without a capture): the move reaching it ends the
// game in its own commit.
func TestMoveLimitThroughTheAPI(t *testing.T) {
	env := gametest.Start(t, nil)
	for _, tt := range []struct {
		name       string
		kind       commonv1.GameKind
		variant    rules.Variant
		wantWinner commonv1.Winner
	}{
		{"janggi", commonv1.GameKind_GAME_KIND_JANGGI, rules.Janggi, commonv1.Winner_WINNER_SECOND},
		{"xiangqi", commonv1.GameKind_GAME_KIND_XIANGQI, rules.Xiangqi, commonv1.Winner_WINNER_DRAW},
	} {
		t.Run(tt.name, func(t *testing.T) {
			moves := quietGame(t, tt.variant)
			req := &gamev1.CreateGameRequest{Kind: tt.kind}
			if tt.variant == rules.Janggi {
				req.Start = &commonv1.Position{Fen: rules.StartFEN(rules.Janggi)}
			}
			tb := create(t, env, req)
			var last *gamev1.MakeMoveResponse
			for i, m := range moves {
				if i > 0 && last.GetGame().GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
					t.Fatalf("after ply %d: status %v, want the game going on", i, last.GetGame().GetStatus())
				}
				last = tb.move(t, m)
			}
			wantEnd(t, last.GetGame(), tt.wantWinner, commonv1.EndMethod_END_METHOD_MOVE_LIMIT)
			wantEnd(t, tb.get(t), tt.wantWinner, commonv1.EndMethod_END_METHOD_MOVE_LIMIT)
		})
	}
}

// quietGame returns the moves of a game of v from its start that captures
// nothing and ends by its move limit, chosen at random with a fixed seed.
func quietGame(t *testing.T, v rules.Variant) []string {
	t.Helper()
	g, err := rules.NewGame(v, "")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var moves []string
	for !g.Outcome().Ended {
		ms := g.LegalMoves()
		rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
		played := false
		for _, m := range ms {
			c := g.Clone()
			info, err := c.Play(m)
			if err != nil {
				t.Fatalf("legal move %v refused: %v", m, err)
			}
			if o := c.Outcome(); info.Captured != rules.NoPiece || info.Pass || (o.Ended && o.Method != rules.MoveLimit) {
				continue
			}
			g, played = c, true
			moves = append(moves, m.String())
			break
		}
		if !played {
			t.Fatalf("after %v: no quiet move", moves)
		}
	}
	return moves
}
