package matchmaking_test

import (
	"context"
	"testing"
	"time"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking"
)

// A deployment that keeps finished games a short time keeps matchmaking's
// records of them as short: the game's record and the players' lists of
// games last --game-keep, whichever way the game was made.
func TestGamesAreRememberedForGameKeep(t *testing.T) {
	keep := 2 * time.Hour
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.GameKeep = keep })
	a, b := e.guest("A"), e.guest("B")
	friends, _ := e.friendGame(a, b)
	aiRequest := rid()
	if _, err := e.mm[0].PlayAi(a.ctx(), &matchmakingv1.PlayAiRequest{RequestId: aiRequest, Kind: janggi, Level: 1, Side: commonv1.Side_SIDE_FIRST}); err != nil {
		t.Fatal(err)
	}
	rdb := redistest.Client(t)
	keys := []string{
		e.cfg.KeyPrefix + "mm:{gm:" + friends.GetGameId() + "}",
		// The game against the AI, for its retries.
		e.cfg.KeyPrefix + "mm:{pl:" + a.id + "}:req:ai:" + aiRequest,
		e.cfg.KeyPrefix + "mm:{pl:" + a.id + "}:g",
		e.cfg.KeyPrefix + "mm:{pl:" + b.id + "}:g",
	}
	for _, key := range keys {
		ttl, err := rdb.PTTL(context.Background(), key).Result()
		if err != nil || ttl <= keep-time.Minute || ttl > keep {
			t.Errorf("%s lives %v (%v), want --game-keep, %v", key, ttl, err, keep)
		}
	}
}
