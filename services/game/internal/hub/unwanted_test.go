package hub_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
)

// A stream of a shard nobody else here watched started while Redis
// refused connections (its SUBSCRIBE failed) and ended before Redis was
// back. go-redis kept the channel of the failed SUBSCRIBE and subscribed
// it on its next connection: the process heard every notification of the
// shard for nothing, until some stream of it came and went again.
func TestAShardWhoseStreamEndedDuringAnOutageWasSubscribedAfterIt(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Addr(t)
	proxy := redistest.NewProxy(t, addr)
	var refused atomic.Bool
	h, _, _, channel := testHubWith(t, ctx, slog.New(slog.DiscardHandler), &redis.Options{
		Addr: proxy.Addr(),
		Dialer: func(ctx context.Context, network, a string) (net.Conn, error) {
			if refused.Load() {
				return nil, errors.New("connection refused (test)")
			}
			var d net.Dialer
			return d.DialContext(ctx, network, a)
		},
	})
	direct := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = direct.Close() })
	a, err := h.Subscribe(ctx, "0/a")
	if err != nil {
		t.Fatal(err)
	}
	publishUntilDelivered(t, direct, channel(0), "0/a", a)

	// Briefer than the hub's three probes (600 ms here), after which it
	// replaces its subscription, and the channels with it.
	refused.Store(true)
	proxy.Drop()
	time.Sleep(100 * time.Millisecond) // the hub's receiver sees its connection go
	b, err := h.Subscribe(ctx, "1/b")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // its SUBSCRIBE is tried, and fails
	h.Unsubscribe(ctx, b)
	time.Sleep(50 * time.Millisecond)
	refused.Store(false)

	publishUntilDelivered(t, direct, channel(0), "0/a", a)
	var n int64
	for range 20 {
		if n = direct.PubSubNumSub(ctx, channel(1)).Val()[channel(1)]; n == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%d subscriber(s) to shard 1 once Redis was back, whose only stream here ended during the outage (hub subscribers: %d)", n, h.Subscribers())
}
