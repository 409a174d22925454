package main

import (
	"context"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
)

// TestGamesRideOutASentinelFailover: the Redis master dies (SIGKILL)
// under load and Sentinel promotes one of its two replicas. palace serve,
// acknowledging a move only once a replica holds it, and the games load
// test, sending calls again while the service answers Unavailable, find
// nothing lost, doubled or skipped.
func TestGamesRideOutASentinelFailover(t *testing.T) {
	st := redistest.NewSentinel(t, 2)
	addr := startServe(t, "--redis-addr", st.URL(), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
		"--redis-wait-replicas", "1", "--redis-wait-timeout", "1s")
	rep := gamesUnderFaults(t, addr, st.Master.Kill, "--retry-unavailable", "--duration", "8s")
	if rep.Moves == 0 || rep.Failovers == 0 {
		t.Fatalf("no call was sent again: %+v", rep)
	}
	s := redis.NewSentinelClient(&redis.Options{Addr: st.Addr})
	defer s.Close()
	now, err := s.GetMasterAddrByName(context.Background(), redistest.SentinelMaster).Result()
	if err != nil {
		t.Fatal(err)
	}
	if net.JoinHostPort(now[0], now[1]) == st.Master.Addr {
		t.Fatalf("sentinel still names the killed master %s", st.Master.Addr)
	}
}
