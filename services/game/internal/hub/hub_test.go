package hub_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/logging"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game/internal/hub"
)

// testHub starts a hub on its own named connection to the shared server.
// Games are named "<shard>/<anything>"; a notification is "<game>\x00<version>".
func testHub(t *testing.T) (*hub.Hub, *redis.Client, string, func(int) string) {
	t.Helper()
	return testHubLogging(t, context.Background(), slog.New(slog.DiscardHandler))
}

// testHubLogging is testHub started with ctx and logging to log.
func testHubLogging(t *testing.T, ctx context.Context, log *slog.Logger) (*hub.Hub, *redis.Client, string, func(int) string) {
	t.Helper()
	return testHubOn(t, ctx, log, redistest.Addr(t))
}

// testHubOn is testHubLogging on the Redis at addr.
func testHubOn(t *testing.T, ctx context.Context, log *slog.Logger, addr string) (*hub.Hub, *redis.Client, string, func(int) string) {
	t.Helper()
	return testHubWith(t, ctx, log, &redis.Options{Addr: addr})
}

// testHubWith is testHubOn with a client of opts, named for the test.
func testHubWith(t *testing.T, ctx context.Context, log *slog.Logger, opts *redis.Options) (*hub.Hub, *redis.Client, string, func(int) string) {
	t.Helper()
	prefix := redistest.Prefix(t)
	name := strings.ReplaceAll(strings.TrimSuffix(prefix, ":"), ":", "-")
	opts.ClientName = name
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	channel := func(shard int) string { return prefix + "gev:" + strconv.Itoa(shard) }
	shardOf := func(id string) int {
		n, _ := strconv.Atoi(strings.SplitN(id, "/", 2)[0])
		return n
	}
	dec := hub.Decoder{
		GameOf: func(p string) string { return strings.SplitN(p, "\x00", 2)[0] },
		Events: func(p string) ([]hub.Event, error) {
			v, err := strconv.ParseUint(strings.SplitN(p, "\x00", 2)[1], 10, 64)
			return []hub.Event{{Version: v}}, err
		},
	}
	h := hub.New(ctx, rdb, log, hub.Config{Channel: channel, ShardOf: shardOf, Decode: dec, Probe: 200 * time.Millisecond})
	t.Cleanup(func() { _ = h.Close() })
	return h, rdb, name, channel
}

func signalled(t *testing.T, s *hub.Sub, what string) {
	t.Helper()
	select {
	case <-s.C:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no signal to read the log", what)
	}
}

func quiet(t *testing.T, s *hub.Sub, what string) {
	t.Helper()
	select {
	case <-s.C:
		t.Fatalf("%s: signalled", what)
	default:
	}
}

// publishUntilDelivered publishes notifications of game id until one
// reaches s (a new subscription is in place only once the server has
// taken it) and returns its version.
func publishUntilDelivered(t *testing.T, rdb *redis.Client, channel, id string, s *hub.Sub) uint64 {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for v := uint64(1); time.Now().Before(deadline); v++ {
		if err := rdb.Publish(ctx, channel, id+"\x00"+strconv.FormatUint(v, 10)).Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case evs := <-s.Events:
			return evs[0].Version
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("no notification of %s reached its subscriber", id)
	return 0
}

// TestSubscriptionConfirmedSignalsItsShard: the streams of a shard are
// told to read their logs when its subscription is confirmed, the first
// time and again after the connection is lost and restored (what was
// published meanwhile is gone), and the streams of other shards are not.
func TestSubscriptionConfirmedSignalsItsShard(t *testing.T) {
	ctx := context.Background()
	h, rdb, name, channel := testHub(t)
	a, err := h.Subscribe(ctx, "0/a")
	if err != nil {
		t.Fatal(err)
	}
	signalled(t, a, "first subscription of shard 0")

	b, err := h.Subscribe(ctx, "1/b")
	if err != nil {
		t.Fatal(err)
	}
	signalled(t, b, "first subscription of shard 1")
	quiet(t, a, "shard 0 when shard 1 is confirmed")

	// Cut the subscription's connection.
	list, err := rdb.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for line := range strings.SplitSeq(strings.TrimSpace(list), "\n") {
		if strings.Contains(line, " name="+name+" ") && strings.Contains(line, " flags=P ") {
			id := strings.TrimPrefix(strings.Fields(line)[0], "id=")
			n, _ := strconv.ParseInt(id, 10, 64)
			if err := rdb.ClientKillByFilter(ctx, "ID", strconv.FormatInt(n, 10)).Err(); err != nil {
				t.Fatal(err)
			}
			killed++
		}
	}
	if killed != 1 {
		t.Fatalf("found %d subscription connections named %s:\n%s", killed, name, list)
	}
	signalled(t, a, "shard 0 after the subscription is restored")
	signalled(t, b, "shard 1 after the subscription is restored")
	publishUntilDelivered(t, rdb, channel(0), "0/a", a)
	publishUntilDelivered(t, rdb, channel(1), "1/b", b)
}

// TestNotificationsReachTheirGameOnly: a notification goes to the
// subscribers of its game, and to none once they unsubscribe.
func TestNotificationsReachTheirGameOnly(t *testing.T) {
	ctx := context.Background()
	h, rdb, _, channel := testHub(t)
	a, err := h.Subscribe(ctx, "0/a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := h.Subscribe(ctx, "0/other")
	if err != nil {
		t.Fatal(err)
	}
	v := publishUntilDelivered(t, rdb, channel(0), "0/a", a)
	if err := rdb.Publish(ctx, channel(0), "0/a\x00"+strconv.FormatUint(v+1, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case evs := <-a.Events:
		if evs[0].Version != v+1 {
			t.Fatalf("got version %d, want %d", evs[0].Version, v+1)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next notification did not arrive")
	}
	select {
	case evs := <-other.Events:
		t.Fatalf("another game's subscriber got %v", evs)
	default:
	}
	if n := h.Subscribers(); n != 2 {
		t.Fatalf("%d subscribers, want 2", n)
	}
	h.Unsubscribe(ctx, a)
	h.Unsubscribe(ctx, other)
	if n := h.Subscribers(); n != 0 {
		t.Fatalf("%d subscribers after unsubscribing, want 0", n)
	}
}

// ctxRecorder records the messages logged and, for each, the value of key
// in the context it was logged with.
type ctxRecorder struct {
	key  any
	mu   sync.Mutex
	seen map[string]any
}

func (r *ctxRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *ctxRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *ctxRecorder) WithGroup(string) slog.Handler            { return r }
func (r *ctxRecorder) Handle(ctx context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[rec.Message] = ctx.Value(r.key)
	return nil
}

func (r *ctxRecorder) value(msg string) (any, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.seen[msg]
	return v, ok
}

// TestUndecodableNotificationLoggedWithHubContext: a notification whose
// events cannot be read is logged with the context the hub was started
// with (a logging handler reads the trace from it), and its game's
// streams are still told to read their logs.
func TestUndecodableNotificationLoggedWithHubContext(t *testing.T) {
	type key struct{}
	rec := &ctxRecorder{key: key{}, seen: map[string]any{}}
	ctx := context.WithValue(context.Background(), key{}, "hub")
	h, rdb, _, channel := testHubLogging(t, ctx, slog.New(rec))
	a, err := h.Subscribe(ctx, "0/a")
	if err != nil {
		t.Fatal(err)
	}
	publishUntilDelivered(t, rdb, channel(0), "0/a", a)
	for len(a.C) > 0 {
		<-a.C // the subscription's confirmation
	}
	if err := rdb.Publish(ctx, channel(0), "0/a\x00not a version").Err(); err != nil {
		t.Fatal(err)
	}
	signalled(t, a, "an undecodable notification")
	v, ok := rec.value("notification")
	if !ok {
		t.Fatal("the undecodable notification was not logged")
	}
	if v != "hub" {
		t.Fatalf("logged with context value %v, want the hub's", v)
	}
}

// TestAnUnsubscribeRedisMissesLosesNothing: a shard's last stream that
// ends while Redis is out of reach cannot send its UNSUBSCRIBE, which is
// no warning, since nothing is lost: the subscription, once restored, is
// to the shards still followed only, and those are delivered again.
func TestAnUnsubscribeRedisMissesLosesNothing(t *testing.T) {
	ctx := context.Background()
	var logs logging.Buffer
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	h, _, _, channel := testHubOn(t, ctx, slog.New(slog.NewTextHandler(&logs, nil)), proxy.Addr())
	direct := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { _ = direct.Close() })
	a, err := h.Subscribe(ctx, "0/a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.Subscribe(ctx, "1/b")
	if err != nil {
		t.Fatal(err)
	}
	publishUntilDelivered(t, direct, channel(0), "0/a", a)
	publishUntilDelivered(t, direct, channel(1), "1/b", b)

	proxy.Cut()
	// Once the hub's receiver has seen its connection go, the UNSUBSCRIBE
	// finds none to send on.
	time.Sleep(300 * time.Millisecond)
	h.Unsubscribe(ctx, b)
	proxy.Restore()

	publishUntilDelivered(t, direct, channel(0), "0/a", a)
	if n := direct.PubSubNumSub(ctx, channel(1)).Val()[channel(1)]; n != 0 {
		t.Fatalf("%d subscribers to shard 1 once Redis is back; want none, its last stream ended", n)
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("logged a warning for an unsubscribe that loses nothing:\n%s", logs.String())
	}
}
