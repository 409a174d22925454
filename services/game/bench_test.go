package game_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/game"
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

// BenchmarkFanOut delivers one move per iteration to every spectator of a
// game, 1,000 of them over 4 connections: the server's cost of a popular
// game's event.
func BenchmarkFanOut(b *testing.B) {
	const spectators, conns = 1000, 4
	env := gametest.Start(b, func(c *game.Config) { c.Heartbeat = 15 * time.Second })
	clients := []gamev1.GameServiceClient{env.Client}
	for range conns - 1 {
		cc, err := grpc.NewClient(env.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cc.Close() })
		clients = append(clients, gamev1.NewGameServiceClient(cc))
	}
	rng := rand.New(rand.NewPCG(1, 1))
	var (
		tb        *table
		g         *gamev1.Game
		plies     int
		stop      context.CancelFunc = func() {}
		delivered atomic.Int64
		all       = make(chan struct{}, 1)
	)
	watch := func() {
		stop()
		tb = create(b, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true})
		g, plies = tb.get(b), 0
		var ctx context.Context
		ctx, stop = context.WithCancel(context.Background())
		var ready sync.WaitGroup
		for i := range spectators {
			ready.Add(1)
			go func() {
				st, err := clients[i%conns].StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: g.GetVersion()})
				ready.Done()
				if err != nil {
					return
				}
				for {
					m, err := st.Recv()
					if err != nil {
						return
					}
					if m.GetEvent().GetMovePlayed() != nil && delivered.Add(1)%spectators == 0 {
						all <- struct{}{}
					}
				}
			}()
		}
		ready.Wait()
	}
	watch()
	defer func() { stop() }()
	for b.Loop() {
		if g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING || plies >= 100 {
			b.StopTimer()
			watch()
			b.StartTimer()
		}
		legal := g.GetLegalMoves()
		resp, err := env.Client.MakeMove(tb.as(g.GetTurn()), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: legal[rng.IntN(len(legal))]})
		if err != nil {
			b.Fatal(err)
		}
		g, plies = resp.GetGame(), plies+1
		<-all
	}
}
