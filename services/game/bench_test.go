package game_test

import (
	"context"
	"math/rand/v2"
	"testing"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/game/gametest"
)

// BenchmarkMakeMove plays random games through the API, one move per
// iteration; BenchmarkProbe is its floor (one Redis write on the same
// path). Compare the two from one run.
func BenchmarkMakeMove(b *testing.B) {
	env := gametest.Start(b, nil)
	rng := rand.New(rand.NewPCG(1, 1))
	var tb *table
	var g *gamev1.Game
	newGame := func() {
		resp, err := env.Client.CreateGame(context.Background(), &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats()})
		if err != nil {
			b.Fatal(err)
		}
		tb = &table{env: env, id: resp.GetGameId(), seats: map[commonv1.Side]string{}}
		for _, c := range resp.GetCredentials() {
			tb.seats[c.GetSide()] = c.GetToken()
		}
		g = resp.GetGame()
	}
	newGame()
	plies := 0
	b.ResetTimer()
	for b.Loop() {
		if g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING || plies > 150 {
			newGame()
			plies = 0
		}
		plies++
		legal := g.GetLegalMoves()
		resp, err := env.Client.MakeMove(tb.as(g.GetTurn()), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: legal[rng.IntN(len(legal))]})
		if err != nil {
			b.Fatal(err)
		}
		g = resp.GetGame()
	}
}

func BenchmarkProbe(b *testing.B) {
	env := gametest.Start(b, nil)
	for b.Loop() {
		if _, err := env.Client.Probe(context.Background(), &gamev1.ProbeRequest{Key: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
}
