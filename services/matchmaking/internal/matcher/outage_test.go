package matcher

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/palacehq/palace/pkg/apptest"
	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/redisx"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// TestAnOutageIsOneLinePerPass: with Redis out of reach every pool fails
// in every pass, ten passes a second; a line per pool (up to --max-pools)
// buried the log, and the repeat filter could not fold lines that each
// named another pool. A pass says how many pools failed, in one line.
func TestAnOutageIsOneLinePerPass(t *testing.T) {
	toRedis := redistest.NewProxy(t, redistest.Addr(t))
	rdb, err := redisx.New(context.Background(), toRedis.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	st := store.New(rdb, redistest.Prefix(t))
	const pools = 5
	for i := range pools {
		pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Control: clock.Control{Kind: clock.Fischer, MainTime: time.Duration(61+i) * time.Second, Increment: time.Second}}
		// A player of its own in each: a player waits in one pool at a time.
		enterPool(t, st, pool, fmt.Sprintf("p%d", i), "r")
	}
	out := &apptest.LogBuffer{}
	m, err := New(Config{Interval: 20 * time.Millisecond, StallAfter: time.Hour, Keep: time.Hour, IdleAfter: time.Hour},
		slog.New(slog.NewJSONHandler(out, nil)), st, nil, noop.NewMeterProvider().Meter("t"))
	if err != nil {
		t.Fatal(err)
	}
	run(t, m)
	for until := time.Now().Add(10 * time.Second); len(m.knownPools()) < pools; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(until) {
			t.Fatalf("the matcher knows %d pools, want %d", len(m.knownPools()), pools)
		}
	}
	toRedis.Cut()
	time.Sleep(2 * time.Second)
	toRedis.Restore()
	seen := 0
	for line := range strings.Lines(out.String()) {
		var rec struct {
			Msg         string
			PoolsFailed int `json:"pools_failed"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Msg != "pairing pass" && rec.Msg != "claim stalled matches" {
			continue
		}
		seen++
		if rec.PoolsFailed != pools {
			t.Fatalf("a line says %d pools failed, want one line for all %d:\n%s", rec.PoolsFailed, pools, out.String())
		}
	}
	if seen == 0 {
		t.Fatalf("no pass failed while Redis was cut off:\n%s", out.String())
	}
}
