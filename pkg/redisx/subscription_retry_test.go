package redisx

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/logging"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestAFailedSubscribeIsSentAgain: the subscription's connection is
// closed by the far end (a Redis restart, a proxy dropping it) while the
// receiving goroutine is busy with a message, so go-redis has not noticed
// yet. Two more channels are wanted: the first SUBSCRIBE is written into
// the dead socket, the second fails, and go-redis reconnects inside that
// failed call, resubscribing the channels it held before it. The channel
// whose SUBSCRIBE failed is sent again, so it is confirmed and its
// messages arrive.
func TestAFailedSubscribeIsSentAgain(t *testing.T) {
	ctx := t.Context()
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	direct := redistest.Client(t)
	p := redistest.Prefix(t)
	a, x, b := p+"a", p+"x", p+"b"

	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	var logs logging.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	confirmed := make(chan string, 1024)
	messages := make(chan string, 1024)
	s := Subscribe(ctx, rdb, log, SubscriptionConfig{
		Message: func(_ context.Context, m *redis.Message) {
			if m.Payload == "busy" {
				// The receiving goroutine is busy with this message (a
				// burst of notifications to decode and fan out).
				entered <- struct{}{}
				<-release
			}
			messages <- m.Channel + "=" + m.Payload
		},
		Subscribed: func(_ context.Context, channel string) { confirmed <- channel },
		// Long enough that no ping is written while receive is busy, so
		// that only keep's SUBSCRIBEs meet the dead socket.
		Probe: time.Second,
	})
	t.Cleanup(func() { _ = s.Close() })

	s.Want(a)
	wait(t, confirmed, "first confirmation", a)
	if err := direct.Publish(ctx, a, "busy").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the busy message never came")
	}

	proxy.Drop() // the far end closes the connection; new ones pass
	time.Sleep(100 * time.Millisecond)
	s.Want(x) // written into the closed socket: the peer answers RST
	time.Sleep(100 * time.Millisecond)
	s.Want(b) // the write fails; go-redis reconnects inside Subscribe
	time.Sleep(200 * time.Millisecond)
	unblock()

	// The new connection confirms a and x; b must follow, and its
	// messages must arrive.
	wait(t, confirmed, "confirmations on the new connection", a, x)
	deadline := time.Now().Add(6 * time.Second) // six probes
	for time.Now().Before(deadline) {
		if err := direct.Publish(ctx, b, "hello").Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-messages:
			if m == b+"=hello" {
				return
			}
		case c := <-confirmed:
			if c == b {
				continue // confirmed at last: its messages follow
			}
		case <-time.After(100 * time.Millisecond):
		}
	}
	n := direct.PubSubNumSub(ctx, b).Val()[b]
	t.Fatalf("channel b was wanted 6 s ago and is still not subscribed on the server (PUBSUB NUMSUB %d): no confirmation, every message lost, while a and x work on the same connection; log:\n%s", n, logs.String())
}
