package main

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
)

// TestGamesRideOutAClusterFailover: a Redis Cluster master dies (SIGKILL)
// under load, its replica is promoted, and the old master comes back as
// the new one's replica. A dead master answers no MOVED, so palace serve
// must find the promoted replica by reloading its map of the slots; the
// games load test, sending calls again while the service answers
// Unavailable, finds nothing lost, doubled or skipped.
func TestGamesRideOutAClusterFailover(t *testing.T) {
	cl := redistest.NewCluster(t, 3)
	cl.AddReplicas(t)
	addr := startServe(t, "--redis-addr", cl.URL(), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
		"--redis-wait-replicas", "1", "--redis-wait-timeout", "1s")
	rep := gamesUnderFaults(t, addr, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		replica := redis.NewClient(&redis.Options{Addr: cl.Replicas[0].Addr})
		defer replica.Close()
		cl.Nodes[0].Kill()
		for {
			if role, err := replica.Do(ctx, "ROLE").Slice(); err == nil && len(role) > 0 && role[0] == "master" {
				break
			}
			if ctx.Err() != nil {
				t.Error("the replica was never promoted")
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		// Back as the promoted master's replica, which can then confirm
		// writes again.
		if err := cl.Nodes[0].Start(ctx); err != nil {
			t.Error(err)
		}
	}, "--retry-unavailable", "--duration", "20s")
	if rep.Moves == 0 || rep.Failovers == 0 {
		t.Fatalf("no call was sent again: %+v", rep)
	}
}
