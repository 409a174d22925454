package redisx

import (
	"context"
	"runtime"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
)

// TestAClientForWaitingHoldsItsCallersBeyondTheUsualPool: its pool is the
// address's (or go-redis' default) plus one connection per caller, and
// its connections are named after the address's client name.
func TestAClientForWaitingHoldsItsCallersBeyondTheUsualPool(t *testing.T) {
	addr := redistest.Addr(t)
	for _, c := range []struct {
		addr, name string
		pool       int
	}{
		{addr, "workers", 10*runtime.GOMAXPROCS(0) + 5},
		{"redis://" + addr + "?pool_size=7&client_name=game", "game-workers", 12},
	} {
		rdb, err := NewForWaiting(context.Background(), c.addr, 5, "workers")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rdb.Close() })
		opts := rdb.(*redis.Client).Options()
		if opts.PoolSize != c.pool {
			t.Errorf("%s: pool of %d, want %d", c.addr, opts.PoolSize, c.pool)
		}
		info, err := rdb.ClientInfo(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if info.Name != c.name {
			t.Errorf("%s: connections named %q, want %q", c.addr, info.Name, c.name)
		}
	}
}
