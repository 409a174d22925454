package ai_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/apptest"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/ai"
	"github.com/palacehq/palace/services/game"
)

// TestIdleWorkersTookTheProcesssConnections: every idle worker holds a
// Redis connection through its wait for a job. They waited on the
// process's one client, whose pool (go-redis' default, 10 per CPU) they
// filled once there were more of them than it holds: the game service in
// the same process (`palace serve --ai-workers 96`) then waited seconds
// for a connection at each player's move. They wait on connections of
// their own now, beyond the process's pool, named for CLIENT LIST.
func TestIdleWorkersTookTheProcesssConnections(t *testing.T) {
	prefix := redistest.Prefix(t)
	pool := 10 * runtime.GOMAXPROCS(0)
	workers := pool + 16
	gcfg := game.DefaultConfig()
	gcfg.KeyPrefix = prefix
	apptest.Start(t, redistest.Addr(t), game.Bind(gcfg), ai.Bind(aiConfig(prefix, workers)))

	rdb := redistest.Client(t)
	waiting := 0
	for deadline := time.Now().Add(10 * time.Second); waiting <= pool && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		list, err := rdb.ClientList(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		waiting = 0
		for line := range strings.Lines(list) {
			if strings.Contains(line, " cmd=xreadgroup") && strings.Contains(line, " name=palace-ai-workers ") {
				waiting++
			}
		}
	}
	if waiting <= pool {
		t.Fatalf("%d idle workers: at most %d waited for a job on connections of their own (want more than the %d a process's pool holds)", workers, waiting, pool)
	}
}
