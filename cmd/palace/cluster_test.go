package main

import (
	"context"
	"testing"

	"github.com/palacehq/palace/pkg/redistest"
	"github.com/redis/go-redis/v9"
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
