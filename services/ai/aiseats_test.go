package ai_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
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
// still replies to the next move, and once only.
func TestUndoRacingTheAIsReplyLeavesTheGameSound(t *testing.T) {
	games, prefix := gameWithWorkers(t, 2)
	for _, tc := range []*commonv1.TimeControl{nil, {Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{MainTime: durationpb.New(time.Minute), Periods: 3, PeriodTime: durationpb.New(10 * time.Second)}}}} {
		g := createWithAISeats(t, games, &gamev1.CreateGameRequest{
			RequestId: prefix + fmt.Sprint(tc != nil), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: tc,
			Seats: []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, PlayerId: "h"}, {Side: commonv1.Side_SIDE_SECOND, AiLevel: 1}},
		}, commonv1.Side_SIDE_FIRST)
		for i := range 40 {
			st := g.waitForWithin(t, 15*time.Second, "human's turn", func(x *gamev1.Game) bool {
				return x.GetTurn() == commonv1.Side_SIDE_FIRST
			})
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
				t.Fatalf("undo %d: %v", i, err)
			}
		}
		st := g.waitForWithin(t, 15*time.Second, "human's turn", func(x *gamev1.Game) bool { return x.GetTurn() == commonv1.Side_SIDE_FIRST })
		if _, err := games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "last", Move: st.GetLegalMoves()[0]}); err != nil {
			t.Fatal(err)
		}
		n := len(st.GetMoves())
		end := g.waitForWithin(t, 15*time.Second, "AI's reply to the last move", func(x *gamev1.Game) bool { return len(x.GetMoves()) == n+2 })
		time.Sleep(time.Second)
		after := g.waitForWithin(t, time.Second, "read", func(*gamev1.Game) bool { return true })
		if len(after.GetMoves()) != n+2 || after.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
			t.Fatalf("after the AI's reply: %d moves (want %d), %v %v", len(after.GetMoves()), n+2, after.GetStatus(), after.GetResult())
		}
		for i, m := range end.GetMoves() {
			want := commonv1.Side_SIDE_FIRST
			if i%2 == 1 {
				want = commonv1.Side_SIDE_SECOND
			}
			if m.GetSide() != want || m.GetPly() != uint32(i+1) {
				t.Fatalf("move %d: %v ply %d", i, m.GetSide(), m.GetPly())
			}
		}
	}
}
