package clock_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/apptest"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/clock"
)

// TestClockWithAnotherShardCountRefusesToStart: the game service indexed
// its deadlines in its shard count; a clock replica counting shards
// differently would never sweep some of them, so it must not start.
func TestClockWithAnotherShardCountRefusesToStart(t *testing.T) {
	g := startGame(t, false)
	cfg := clock.DefaultConfig()
	cfg.GameAddr, cfg.KeyPrefix, cfg.DeadlineShards = g.Addr, g.Config.KeyPrefix, g.Config.DeadlineShards*2
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := app.Run(ctx, app.Options{
		Name: "clock-test",
		Config: app.Config{
			Listen: "127.0.0.1:0", RedisAddr: redistest.Addr(t), LogFormat: "text", LogLevel: "error",
			ShutdownTimeout: time.Second, MaxRecvBytes: 1 << 20, ServiceKeys: apptest.ServiceKeys,
		},
		Services:  []app.Binder{clock.Bind(cfg)},
		LogOutput: io.Discard,
		OnServing: func(string) { t.Error("the clock service started with another shard count") },
	})
	if err == nil || !strings.Contains(err.Error(), "--deadline-shards") {
		t.Fatalf("a clock with %d shards on a game with %d: %v; want it refused, naming --deadline-shards", cfg.DeadlineShards, g.Config.DeadlineShards, err)
	}
}
