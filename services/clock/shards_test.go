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
	"github.com/palacehq/palace/services/game"
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

// TestAProcessOnAReadOnlyReplicaSaysSo: a game or clock process pointed at
// a read-only replica (an old primary after a failover) cannot record the
// shard count, and says why, not that --deadline-shards is wrong.
func TestAProcessOnAReadOnlyReplicaSaysSo(t *testing.T) {
	// A replica of a primary nobody runs: it refuses every write.
	replica := redistest.Own(t, "--replicaof", "127.0.0.1", "1")
	clockCfg := clock.DefaultConfig()
	clockCfg.GameAddr = "127.0.0.1:1"
	for name, bind := range map[string]app.Binder{"game": game.Bind(game.DefaultConfig()), "clock": clock.Bind(clockCfg)} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := app.Run(ctx, app.Options{
			Name: name + "-test",
			Config: app.Config{
				Listen: "127.0.0.1:0", RedisAddr: replica.Addr, LogFormat: "text", LogLevel: "error",
				ShutdownTimeout: time.Second, MaxRecvBytes: 1 << 20, ServiceKeys: apptest.ServiceKeys,
			},
			Services:  []app.Binder{bind},
			LogOutput: io.Discard,
			OnServing: func(string) { t.Errorf("the %s service started on a read-only replica", name) },
		})
		cancel()
		if err == nil || !strings.Contains(err.Error(), "READONLY") || strings.Contains(err.Error(), "--deadline-shards") {
			t.Errorf("the %s service on a read-only replica: %v; want Redis' refusal, not the flag blamed", name, err)
		}
	}
}
