package ai_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/apptest"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/ai"
	"github.com/palacehq/palace/services/game"
)

// gameWithWorkers runs a game service and n AI workers, and returns a
// client of the game service and the key prefix.
func gameWithWorkers(t *testing.T, workers int) (gamev1.GameServiceClient, string) {
	t.Helper()
	prefix := redistest.Prefix(t)
	gcfg := game.DefaultConfig()
	gcfg.KeyPrefix = prefix
	cc := apptest.Start(t, redistest.Addr(t), game.Bind(gcfg), ai.Bind(aiConfig(prefix, workers)))
	return gamev1.NewGameServiceClient(cc), prefix
}

// createWithAISeats creates req and returns the game with the human seat's
// context (if any) for humanSide.
func createWithAISeats(t *testing.T, games gamev1.GameServiceClient, req *gamev1.CreateGameRequest, humanSide commonv1.Side) *aiGame {
	t.Helper()
	resp, err := games.CreateGame(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	g := &aiGame{games: games, id: resp.GetGameId(), human: context.Background()}
	for _, c := range resp.GetCredentials() {
		if c.GetSide() == humanSide {
			g.human = metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+c.GetToken())
		}
	}
	return g
}

// Games between two AI seats, untimed (as a tournament's AI runs may be),
// run to an end the rules decide, without stalling: every move of one
// seat leads to the other's, and Janggi's 200-ply limit bounds them.
func TestGamesBetweenTwoAISeatsRunToTheirEnd(t *testing.T) {
	games, prefix := gameWithWorkers(t, 2)
	for _, kind := range []commonv1.GameKind{commonv1.GameKind_GAME_KIND_JANGGI, commonv1.GameKind_GAME_KIND_XIANGQI} {
		g := createWithAISeats(t, games, &gamev1.CreateGameRequest{
			RequestId: prefix + kind.String(), Kind: kind, Public: true,
			Seats: []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, AiLevel: 1}, {Side: commonv1.Side_SIDE_SECOND, AiLevel: 2}},
		}, commonv1.Side_SIDE_UNSPECIFIED)
		end := g.waitForWithin(t, 120*time.Second, kind.String()+" AI-vs-AI game ends", func(x *gamev1.Game) bool {
			return x.GetStatus() == commonv1.GameStatus_GAME_STATUS_ENDED
		})
		t.Logf("%v: %d plies, %v", kind, len(end.GetMoves()), end.GetResult())
		if kind == commonv1.GameKind_GAME_KIND_JANGGI && len(end.GetMoves()) > 200 {
			t.Errorf("janggi game of %d plies", len(end.GetMoves()))
		}
	}
}

// The human moves and takes it back at once, over and over, racing the
// AI's reply, with a clock and without: the sides keep alternating, the AI
// still replies to the next move, and once only. The human's moves are
// poor, so the AI may mate them: a game it wins by the rules is checked and
// the rounds go on in a new one.
func TestUndoRacingTheAIsReplyLeavesTheGameSound(t *testing.T) {
	games, prefix := gameWithWorkers(t, 2)
	for _, tc := range []*commonv1.TimeControl{nil, {Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{MainTime: durationpb.New(time.Minute), Periods: 3, PeriodTime: durationpb.New(10 * time.Second)}}}} {
		created := 0
		newGame := func() *aiGame {
			created++
			return createWithAISeats(t, games, &gamev1.CreateGameRequest{
				RequestId: fmt.Sprintf("%s%v-%d", prefix, tc != nil, created), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: tc,
				Seats: []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, PlayerId: "h"}, {Side: commonv1.Side_SIDE_SECOND, AiLevel: 1}},
			}, commonv1.Side_SIDE_FIRST)
		}
		g := newGame()
		// humansTurn waits for the human's turn, starting a new game after
		// checking one that ended.
		humansTurn := func() *gamev1.Game {
			for {
				st := g.waitForWithin(t, 15*time.Second, "human's turn or the end", func(x *gamev1.Game) bool {
					return x.GetTurn() == commonv1.Side_SIDE_FIRST || x.GetStatus() == commonv1.GameStatus_GAME_STATUS_ENDED
				})
				if st.GetStatus() != commonv1.GameStatus_GAME_STATUS_ENDED {
					return st
				}
				checkAlternating(t, st)
				if w, m := st.GetResult().GetWinner(), st.GetResult().GetMethod(); w != commonv1.Winner_WINNER_SECOND || m != commonv1.EndMethod_END_METHOD_CHECKMATE && m != commonv1.EndMethod_END_METHOD_STALEMATE {
					t.Fatalf("game %d ended %v by %v after %d moves; only the AI's win by the rules can end it", created, w, m, len(st.GetMoves()))
				}
				g = newGame()
			}
		}
		for i := range 40 {
			st := humansTurn()
			if _, err := games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: fmt.Sprintf("m%d", i), Move: st.GetLegalMoves()[i%len(st.GetLegalMoves())]}); err != nil {
				t.Fatal(err)
			}
			if i%3 == 2 {
				continue // let the AI reply, keep the game growing
			}
			if i%2 == 1 {
				time.Sleep(time.Duration(i%5) * time.Millisecond)
			}
			if _, err := games.Undo(g.human, &gamev1.UndoRequest{GameId: g.id, RequestId: fmt.Sprintf("u%d", i)}); err != nil {
				if status.Code(err) == codes.FailedPrecondition {
					mated := g.id
					humansTurn() // checks the ended game and starts another
					if g.id != mated {
						continue // the AI's reply mated the human before the undo
					}
				}
				t.Fatalf("undo %d: %v", i, err)
			}
		}
		st := humansTurn()
		if _, err := games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "last", Move: st.GetLegalMoves()[0]}); err != nil {
			t.Fatal(err)
		}
		n := len(st.GetMoves())
		end := g.waitForWithin(t, 15*time.Second, "AI's reply to the last move", func(x *gamev1.Game) bool { return len(x.GetMoves()) == n+2 })
		time.Sleep(time.Second)
		after := g.waitForWithin(t, time.Second, "read", func(*gamev1.Game) bool { return true })
		if len(after.GetMoves()) != n+2 || after.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING && after.GetResult().GetWinner() != commonv1.Winner_WINNER_SECOND {
			t.Fatalf("after the AI's reply: %d moves (want %d), %v %v", len(after.GetMoves()), n+2, after.GetStatus(), after.GetResult())
		}
		checkAlternating(t, end)
		t.Logf("%d games for 40 rounds (time control %v)", created, tc != nil)
	}
}

// checkAlternating fails unless g's moves alternate sides from the first
// seat, numbered from ply 1.
func checkAlternating(t *testing.T, g *gamev1.Game) {
	t.Helper()
	for i, m := range g.GetMoves() {
		want := commonv1.Side_SIDE_FIRST
		if i%2 == 1 {
			want = commonv1.Side_SIDE_SECOND
		}
		if m.GetSide() != want || m.GetPly() != uint32(i+1) {
			t.Fatalf("move %d: %v ply %d", i, m.GetSide(), m.GetPly())
		}
	}
}
