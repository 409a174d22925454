package redisx

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
)

// heard is what a Subscription under test passes on: messages'
// payloads and confirmed channels.
type heard struct {
	messages, confirmed chan string
}

func subscribeForTest(t *testing.T, addr string, probe time.Duration) (*Subscription, heard) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	h := heard{messages: make(chan string, 1024), confirmed: make(chan string, 1024)}
	s := Subscribe(t.Context(), rdb, slog.New(slog.DiscardHandler), SubscriptionConfig{
		Message:    func(_ context.Context, m *redis.Message) { h.messages <- m.Payload },
		Subscribed: func(_ context.Context, channel string) { h.confirmed <- channel },
		Probe:      probe,
	})
	t.Cleanup(func() { _ = s.Close() })
	return s, h
}

// wait takes from c until every one of want has come, in any order.
func wait(t *testing.T, c chan string, what string, want ...string) {
	t.Helper()
	missing := map[string]bool{}
	for _, w := range want {
		missing[w] = true
	}
	deadline := time.After(10 * time.Second)
	for len(missing) > 0 {
		select {
		case got := <-c:
			delete(missing, got)
		case <-deadline:
			t.Fatalf("%s: %v never came", what, missing)
		}
	}
}

// TestASubscriptionFollowsTheChannelsWanted: Want subscribes a channel,
// confirmed before its messages arrive; Unwant unsubscribes it on the
// server.
func TestASubscriptionFollowsTheChannelsWanted(t *testing.T) {
	ctx := t.Context()
	direct := redistest.Client(t)
	a, b := redistest.Prefix(t)+"a", redistest.Prefix(t)+"b"
	s, h := subscribeForTest(t, redistest.Addr(t), 0)
	s.Want(a)
	s.Want(b)
	wait(t, h.confirmed, "confirmations", a, b)
	if err := direct.Publish(ctx, a, "1").Err(); err != nil {
		t.Fatal(err)
	}
	wait(t, h.messages, "a message of a", "1")
	s.Unwant(a)
	deadline := time.Now().Add(10 * time.Second)
	for direct.PubSubNumSub(ctx, a).Val()[a] != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a is still subscribed on the server after Unwant")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := direct.PubSubNumSub(ctx, b).Val()[b]; n != 1 {
		t.Fatalf("%d subscriptions to b, want 1", n)
	}
}

// TestASilentSubscriptionIsReplaced: the subscription's connection goes
// silent without failing, while the server stays reachable. Its pings go
// unanswered, a new connection replaces it, and its confirmation says
// that what was published meanwhile is to be read again.
func TestASilentSubscriptionIsReplaced(t *testing.T) {
	ctx := t.Context()
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	direct := redistest.Client(t)
	c := redistest.Prefix(t) + "c"
	s, h := subscribeForTest(t, proxy.Addr(), 100*time.Millisecond)
	s.Want(c)
	wait(t, h.confirmed, "first confirmation", c)

	proxy.Freeze()
	if err := direct.Publish(ctx, c, "lost").Err(); err != nil {
		t.Fatal(err)
	}
	wait(t, h.confirmed, "confirmation on a new connection", c)
	if err := direct.Publish(ctx, c, "after").Err(); err != nil {
		t.Fatal(err)
	}
	wait(t, h.messages, "a message on the new connection", "after")
}
