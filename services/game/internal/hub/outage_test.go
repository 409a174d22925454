package hub_test

import (
	"context"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game/internal/hub"
)

// hubBehindProxy starts a hub that reaches Redis through a proxy, with a
// subscriber to game 0/a whose subscription is in place, and a client
// that reaches Redis directly.
func hubBehindProxy(t *testing.T) (*hub.Hub, *redistest.Proxy, *redis.Client, func(int) string, *hub.Sub) {
	t.Helper()
	ctx := context.Background()
	addr := redistest.Addr(t)
	proxy := redistest.NewProxy(t, addr)
	h, _, _, channel := testHubOn(t, ctx, slog.New(slog.DiscardHandler), proxy.Addr())
	direct := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = direct.Close() })
	a, err := h.Subscribe(ctx, "0/a")
	if err != nil {
		t.Fatal(err)
	}
	return h, proxy, direct, channel, a
}

// TestASilentSubscriptionIsReplaced: the hub's subscription connection
// goes silent without closing (a partition, a master replaced behind the
// same address: no error for as long as the kernel keeps it, some 15
// minutes), while Redis stays reachable over new connections. The hub
// notices that its pings go unanswered and subscribes again on a new
// connection, whose confirmation tells the streams to catch up.
func TestASilentSubscriptionIsReplaced(t *testing.T) {
	ctx := context.Background()
	_, proxy, direct, channel, a := hubBehindProxy(t)
	v := publishUntilDelivered(t, direct, channel(0), "0/a", a)
	// Notifications still on their way land meanwhile, and are dropped:
	// only a version published after the freeze shows a recovery.
	time.Sleep(500 * time.Millisecond)
	for len(a.C) > 0 || len(a.Events) > 0 {
		select {
		case <-a.C:
		case <-a.Events:
		}
	}

	proxy.Freeze()
	frozenAt := v + 1000
	v = frozenAt
	start := time.Now()
	deadline := start.Add(20 * time.Second)
	for time.Now().Before(deadline) {
		v++
		if err := direct.Publish(ctx, channel(0), "0/a\x00"+strconv.FormatUint(v, 10)).Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-a.C:
			t.Logf("signalled %v after the freeze", time.Since(start))
			return
		case evs := <-a.Events:
			if evs[0].Version > frozenAt {
				t.Logf("version %d delivered %v after the freeze", evs[0].Version, time.Since(start))
				return
			}
			t.Logf("version %d, published before the freeze, delivered after it", evs[0].Version)
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Fatalf("the hub's subscription connection went silent %v ago while Redis stayed reachable, and its stream got neither a notification nor a signal to read the log (%d versions published meanwhile): the shared reader never recovers", time.Since(start).Round(time.Second), v)
}

// TestStreamsStartAndEndWhileRedisHangs: while Redis hangs (the
// subscription's connection gone, new ones accepted and never answered),
// a stream of a game of another shard starts, a stream of a subscribed
// shard starts, and one ends: none of them waits on Redis, nor on each
// other, so an ended stream does not keep its place among --max-streams.
func TestStreamsStartAndEndWhileRedisHangs(t *testing.T) {
	ctx := context.Background()
	h, proxy, direct, channel, a := hubBehindProxy(t)
	publishUntilDelivered(t, direct, channel(0), "0/a", a)
	// A second stream of the same game, which will end during the stall.
	a2, err := h.Subscribe(ctx, "0/a")
	if err != nil {
		t.Fatal(err)
	}

	// Redis hangs: the subscription's connection is gone, new ones are
	// accepted and never answered.
	proxy.Hold()
	proxy.Drop()
	time.Sleep(200 * time.Millisecond)

	// A stream of a game of another shard starts: its Subscribe has to
	// subscribe, over a connection that cannot be made.
	other := make(chan error, 1)
	var otherTook time.Duration
	go func() {
		t0 := time.Now()
		s, err := h.Subscribe(ctx, "1/x")
		otherTook = time.Since(t0)
		if err == nil {
			h.Unsubscribe(ctx, s)
		}
		other <- err
	}()
	time.Sleep(200 * time.Millisecond)

	// Meanwhile a stream of shard 0 ends (not the shard's last: nothing to
	// ask Redis) ...
	unsubTook := make(chan time.Duration, 1)
	go func() {
		t0 := time.Now()
		h.Unsubscribe(context.WithoutCancel(ctx), a2)
		unsubTook <- time.Since(t0)
	}()
	// ... and one of shard 0, subscribed already, starts (nothing to ask
	// Redis either), for a client that gives up after 200 ms.
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	b, err := h.Subscribe(sctx, "0/b")
	took := time.Since(t0)
	if err == nil {
		h.Unsubscribe(ctx, b)
	}
	ut := <-unsubTook
	proxy.Restore()
	otherErr := <-other
	t.Logf("the other shard's Subscribe took %v: %v", otherTook.Round(time.Millisecond), otherErr)
	if took > time.Second || ut > time.Second {
		t.Fatalf("with another shard's Subscribe waiting on Redis, a Subscribe of a game whose shard is subscribed already (200 ms context) took %v (err %v), and an Unsubscribe that is not its shard's last took %v: both waited for that dial under the hub's mutex", took.Round(time.Millisecond), err, ut.Round(time.Millisecond))
	}
}

// TestManyCyclesLeakNothing: many concurrent subscribe/unsubscribe
// cycles over several shards, while notifications flow, leave no
// subscriber, no Redis subscription and no goroutine behind.
func TestManyCyclesLeakNothing(t *testing.T) {
	ctx := context.Background()
	h, rdb, _, channel := testHub(t)
	// Warm up: the hub's own goroutines start.
	w, err := h.Subscribe(ctx, "0/warm")
	if err != nil {
		t.Fatal(err)
	}
	publishUntilDelivered(t, rdb, channel(0), "0/warm", w)
	h.Unsubscribe(ctx, w)
	time.Sleep(100 * time.Millisecond)
	before := runtime.NumGoroutine()

	stop := make(chan struct{})
	var pubs sync.WaitGroup
	pubs.Go(func() {
		for v := uint64(1); ; v++ {
			select {
			case <-stop:
				return
			default:
			}
			for sh := range 4 {
				_ = rdb.Publish(ctx, channel(sh), strconv.Itoa(sh)+"/g\x00"+strconv.FormatUint(v, 10)).Err()
			}
		}
	})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 150 {
				s, err := h.Subscribe(ctx, strconv.Itoa((i+j)%4)+"/g")
				if err != nil {
					t.Error(err)
					return
				}
				if j%3 == 0 {
					time.Sleep(time.Millisecond)
				}
				h.Unsubscribe(ctx, s)
			}
		})
	}
	wg.Wait()
	close(stop)
	pubs.Wait()
	if n := h.Subscribers(); n != 0 {
		t.Fatalf("%d subscribers left", n)
	}
	var left map[string]int64
	for range 50 {
		left = map[string]int64{}
		for sh := range 4 {
			if n := rdb.PubSubNumSub(ctx, channel(sh)).Val()[channel(sh)]; n != 0 {
				left[channel(sh)] = n
			}
		}
		if len(left) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) != 0 {
		t.Fatalf("Redis subscriptions left: %v", left)
	}
	var after int
	for range 50 {
		if after = runtime.NumGoroutine(); after <= before {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if after > before {
		t.Fatalf("%d goroutines before, %d after", before, after)
	}
}

// TestNoSilentLossAcrossResubscriptions models a stream the way the
// handler reads the hub (subscribe, read the "log", then follow events,
// reading the log again at a gap or a signal) while other streams make
// the shard's subscription come and go, and checks that no stream ever
// ends up behind the log with neither the missing versions nor a signal.
func TestNoSilentLossAcrossResubscriptions(t *testing.T) {
	ctx := context.Background()
	h, rdb, _, channel := testHub(t)
	var logv atomic.Uint64 // the game's log: written before its notification
	var pubMu sync.Mutex
	publish := func() {
		pubMu.Lock()
		defer pubMu.Unlock()
		v := logv.Add(1)
		if err := rdb.Publish(ctx, channel(0), "0/g\x00"+strconv.FormatUint(v, 10)).Err(); err != nil {
			t.Error(err)
		}
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			publish()
			time.Sleep(200 * time.Microsecond)
		}
	})
	var bad atomic.Int64
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			for round := range 150 {
				// Now and then every stream is gone: the shard's
				// subscription is dropped and taken again.
				time.Sleep(time.Duration((i+round)%3) * time.Millisecond)
				s, err := h.Subscribe(ctx, "0/g")
				if err != nil {
					t.Error(err)
					return
				}
				next := logv.Load() + 1 // the catch-up read
				// follow takes the events that come next, and reads the
				// log again at a gap.
				follow := func(next uint64, evs []hub.Event) uint64 {
					for _, e := range evs {
						switch {
						case e.Version < next:
						case e.Version == next:
							next++
						default:
							next = logv.Load() + 1
						}
					}
					return next
				}
				until := time.Now().Add(time.Duration(1+(i+round)%5) * time.Millisecond)
				for time.Now().Before(until) {
					select {
					case evs := <-s.Events:
						next = follow(next, evs)
					case <-s.C:
						next = logv.Load() + 1
					case <-time.After(100 * time.Microsecond):
					}
				}
				// Let what was published reach the hub, then take what is
				// there: the stream must be level with the log, or told to
				// read it.
				target := logv.Load()
				settle := time.Now().Add(2 * time.Second)
				for next <= target && time.Now().Before(settle) {
					select {
					case evs := <-s.Events:
						next = follow(next, evs)
					case <-s.C:
						next = logv.Load() + 1
					case <-time.After(10 * time.Millisecond):
					}
				}
				if next <= target {
					bad.Add(1)
					t.Errorf("stream stuck at %d, log at %d, no signal", next, target)
				}
				h.Unsubscribe(ctx, s)
			}
		})
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	if bad.Load() > 0 {
		t.Fatalf("%d streams silently behind", bad.Load())
	}
}
