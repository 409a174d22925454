package game_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game/gametest"
)

// TestAProbeCounterWhoseFirstAnswerIsLostExpires: the Probe counter (the
// load test's floor) outlives its first probe by an hour (store.probeTTL).
// Its expiry was set by a second command once the first INCR answered 1:
// that answer lost (a network blip, a failover, the caller leaving), the
// expiry was never set, every later probe reading more than 1, and the key
// stayed in Redis for ever.
func TestAProbeCounterWhoseFirstAnswerIsLostExpires(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	env := gametest.StartOn(t, proxy.Addr(), nil)
	key := env.Config.KeyPrefix + "probe:{review-floor}"

	// Connections open and idle, so that the probe's INCR is sent at once
	// rather than behind a new connection's handshake.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			_, _ = env.Client.Probe(context.Background(), &gamev1.ProbeRequest{Key: "review-warm-" + strconv.Itoa(i)})
		})
	}
	wg.Wait()
	proxy.Blackhole() // the INCR reaches Redis, its answer is lost
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := env.Client.Probe(ctx, &gamev1.ProbeRequest{Key: "review-floor"})
	cancel()
	t.Logf("probe during the blip: %v", err)
	proxy.Restore()

	// The next probes succeed.
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := env.Client.Probe(ctx, &gamev1.ProbeRequest{Key: "review-floor"})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("probe after Redis came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	n, _ := env.Redis.Get(context.Background(), key).Result()
	ttl, err := env.Redis.PTTL(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	defer env.Redis.Del(context.Background(), key)
	if ttl < 0 {
		t.Fatalf("probe counter %s (count %s) has no expiry (PTTL %v): it stays in Redis for ever", key, n, ttl)
	}
}
