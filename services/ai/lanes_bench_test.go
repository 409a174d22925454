package ai_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/apptest"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/ai"
	"github.com/palacehq/palace/services/game"
)

// BenchmarkAIReplyBesideAIGames times the AI's reply to a player while
// one worker also plays 16 games between two AI seats (level 5), whose
// jobs keep the queue full. Each op is one human move and the AI's reply;
// the reply's own search (level 1) is a small part of it.
func BenchmarkAIReplyBesideAIGames(b *testing.B) {
	prefix := redistest.Prefix(b)
	gcfg := game.DefaultConfig()
	gcfg.KeyPrefix = prefix
	acfg := aiConfig(prefix, 1)
	acfg.ClaimAfter = time.Minute
	games := gamev1.NewGameServiceClient(apptest.Start(b, redistest.Addr(b), game.Bind(gcfg), ai.Bind(acfg)))
	for i := range 16 {
		_, err := games.CreateGame(context.Background(), &gamev1.CreateGameRequest{
			RequestId: fmt.Sprintf("%sbots%d", prefix, i), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true,
			Seats: []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, AiLevel: 5}, {Side: commonv1.Side_SIDE_SECOND, AiLevel: 5}},
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(time.Second) // for the background games' jobs to fill the queue
	var g *aiGame
	n := 0
	b.ResetTimer()
	for i := range b.N {
		if g == nil || n >= 30 {
			b.StopTimer()
			g = newAIGame(b, games, fmt.Sprintf("%shuman%d", prefix, i), commonv1.GameKind_GAME_KIND_XIANGQI)
			n = 0
			b.StartTimer()
		}
		st := g.waitFor(b, func(x *gamev1.Game) bool {
			return x.GetTurn() == commonv1.Side_SIDE_FIRST || x.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING
		})
		if st.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
			g = nil
			continue
		}
		if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: fmt.Sprintf("%s-%d", g.id, n), Move: st.GetLegalMoves()[0]}); err != nil {
			b.Fatal(err)
		}
		n += 2
		g.waitFor(b, func(x *gamev1.Game) bool {
			return len(x.GetMoves()) >= n || x.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING
		})
	}
}
