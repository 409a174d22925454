package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestEverythingOnARedisCluster runs every service in one process on a
// Redis Cluster of three masters and drives each with its load test: a
// script that touched two slots, a key without its game's hash tag or a
// notification that reached only one node would show up as an error or a
// fault in a report.
func TestEverythingOnARedisCluster(t *testing.T) {
	cluster := redistest.NewCluster(t, 3)
	keys := playerKeys
	addr := startServe(t, "--redis-addr", cluster.URL(), "--key-prefix", redistest.Prefix(t), "--ai-workers", "1",
		"--player-signing-keys", keys, "--pairing-interval", "50ms")

	t.Run("games", func(t *testing.T) {
		out, errOut, code := palace("loadtest", "games", "--addr", addr, "--games", "12", "--duration", "2s",
			"--retry-rate", "0.3", "--reconnect-rate", "0.2")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var rep gamesReport
		lastJSON(t, out, &rep)
		if rep.Moves == 0 || rep.Games < 12 || rep.Retries == 0 || rep.Reconnects == 0 {
			t.Fatalf("nothing exercised: %+v", rep)
		}
		if rep.Lost != 0 || rep.Duplicated != 0 || rep.Gaps != 0 || rep.Errors != 0 {
			t.Fatalf("load test found faults: %+v\n%s", rep, errOut)
		}
	})
	t.Run("clocks", func(t *testing.T) {
		out, errOut, code := palace("loadtest", "clocks", "--addr", addr, "--games", "20", "--spread", "1s",
			"--min-time", "2s", "--max-time", "3s", "--early", "0.3", "--racing", "0.4", "--byoyomi", "0.5")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var rep clocksReport
		lastJSON(t, out, &rep)
		if rep.Flagged != 20 || rep.Missed != 0 || rep.WronglyFlagged != 0 || rep.Inconsistent != 0 || rep.Unexpected != 0 || rep.Errors != 0 {
			t.Fatalf("load test found faults: %+v\n%s", rep, errOut)
		}
	})
	t.Run("matchmaking", func(t *testing.T) {
		out, errOut, code := palace("loadtest", "matchmaking", "--addr", addr, "--game-addr", addr, "--tickets", "60",
			"--concurrency", "20", "--cancel", "0.2", "--player-signing-keys", keys, "--timeout", "60s")
		if code != exitOK {
			t.Fatalf("exit %d: %s\n%s", code, out, errOut)
		}
		var rep mmReport
		lastJSON(t, out, &rep)
		if rep.Tickets != 60 || rep.Matched != 60 || rep.GamesChecked != rep.Games || rep.DoublePaired != 0 || rep.Unmatched != 0 || rep.Errors != 0 {
			t.Fatalf("load test found faults: %+v\n%s", rep, errOut)
		}
	})
	t.Run("ai", func(t *testing.T) {
		out, errOut, code := palace("loadtest", "ai", "--addr", addr, "--level", "1", "--clients", "2", "--duration", "1s")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var rep aiReport
		lastJSON(t, out, &rep)
		if rep.Jobs == 0 || rep.Errors != 0 {
			t.Fatalf("report %+v\n%s", rep, errOut)
		}
	})

	t.Run("ai-games", func(t *testing.T) {
		// loadtest ai calls BestMove, which no queue carries: a game
		// against the AI goes through its job queue in Redis, the one
		// each worker reads with its consumer group.
		playAgainstTheAI(t, addr, 4)
	})

	// The test means something only if the state is spread over the
	// cluster: every master must hold keys.
	for _, n := range cluster.Nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		size, err := c.DBSize(context.Background()).Result()
		c.Close()
		if err != nil || size == 0 {
			t.Errorf("master %s holds %d keys (%v)", n.Addr, size, err)
		}
	}
}

// playAgainstTheAI plays a guest's Xiangqi game against the AI through
// the API until the AI has made replies moves, the guest answering each
// with its first legal move.
func playAgainstTheAI(t *testing.T, addr string, replies int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	mm, games := matchmakingv1.NewMatchmakingServiceClient(cc), gamev1.NewGameServiceClient(cc)
	guest, err := mm.CreateGuest(ctx, &matchmakingv1.CreateGuestRequest{Nickname: "cluster"})
	if err != nil {
		t.Fatal(err)
	}
	bearer := func(token string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	played, err := mm.PlayAi(bearer(guest.GetToken()), &matchmakingv1.PlayAiRequest{
		RequestId: "cluster-ai", Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Level: 1, Side: commonv1.Side_SIDE_SECOND,
	})
	if err != nil {
		t.Fatalf("PlayAi: %v", err)
	}
	seat := played.GetSeat()
	as := bearer(seat.GetToken())
	for ply := 1; ply <= 2*replies; ply += 2 {
		// The AI plays first (the guest took the second side): wait for
		// its move at this ply.
		var g *gamev1.Game
		for {
			r, err := games.GetGame(as, &gamev1.GetGameRequest{GameId: seat.GetGameId()})
			if err != nil {
				t.Fatal(err)
			}
			if g = r.GetGame(); len(g.GetMoves()) >= ply {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the AI made no move at ply %d: its job went missing on the cluster", ply)
			case <-time.After(20 * time.Millisecond):
			}
		}
		if g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING || len(g.GetLegalMoves()) == 0 {
			return // the game ended: every reply so far came through the queue
		}
		if _, err := games.MakeMove(as, &gamev1.MakeMoveRequest{
			GameId: seat.GetGameId(), RequestId: fmt.Sprintf("cluster-ai-%d", ply), ExpectedVersion: g.GetVersion(), Move: g.GetLegalMoves()[0],
		}); err != nil {
			t.Fatalf("move at ply %d: %v", ply+1, err)
		}
	}
}
