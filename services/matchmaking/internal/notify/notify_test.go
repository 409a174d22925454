package notify

import (
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
)

func fired(t *testing.T, s *Sub, what string) {
	t.Helper()
	select {
	case <-s.C:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not fired", what)
	}
}

func notFired(t *testing.T, s *Sub, what string) {
	t.Helper()
	select {
	case <-s.C:
		t.Fatalf("%s: fired", what)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestSignalsReachTheirIDs: a signal fires the subscribers of the ids it
// names, and no other.
func TestSignalsReachTheirIDs(t *testing.T) {
	ctx := t.Context()
	rdb := redistest.Client(t)
	channel := redistest.Prefix(t) + "notify"
	h, err := New(ctx, rdb, slog.New(slog.DiscardHandler), channel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	x, y, z := h.Subscribe("x"), h.Subscribe("y"), h.Subscribe("z")
	if err := rdb.Publish(ctx, channel, "x,z").Err(); err != nil {
		t.Fatal(err)
	}
	fired(t, x, "x, named")
	fired(t, z, "z, named")
	notFired(t, y, "y, not named")
	h.Unsubscribe(x)
	if n := h.Watchers(); n != 2 {
		t.Fatalf("%d watchers, want 2", n)
	}
}

// TestEveryWatcherFiresWhenTheSubscriptionIsRestored: the signals
// published while the subscription's connection was down are lost, so
// its restoration fires every watcher, to read its state again.
func TestEveryWatcherFiresWhenTheSubscriptionIsRestored(t *testing.T) {
	ctx := t.Context()
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	channel := redistest.Prefix(t) + "notify"
	h, err := New(ctx, rdb, slog.New(slog.DiscardHandler), channel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	x, y := h.Subscribe("x"), h.Subscribe("y")
	notFired(t, x, "x before anything happened")
	proxy.Drop()
	fired(t, x, "x, once the subscription is restored")
	fired(t, y, "y, once the subscription is restored")
}
