package matcher

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/redisx"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// TestTicketsWaitingDoNotHoldAScrapeOnASilentRedis: a Redis that stalls
// (its machine frozen, its link cut without a reset) must not hold a
// scrape of /metrics past Prometheus' timeout, or the scrape fails whole
// and palace_redis_reachable, the gauge an operator alerts on for exactly
// this, is never seen.
func TestTicketsWaitingDoNotHoldAScrapeOnASilentRedis(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Own(t)
	rdb, err := redisx.New(ctx, srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	reader := sdkmetric.NewManualReader()
	m, err := New(Config{Interval: time.Hour, Keep: time.Hour, IdleAfter: time.Hour}, slog.New(slog.NewTextHandler(io.Discard, nil)),
		store.New(rdb, ""), nil, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("t"))
	if err != nil {
		t.Fatal(err)
	}
	m.Touch(store.Pool{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Control: clock.Default()})
	srv.Pause(t)
	t.Cleanup(func() { srv.Resume(t) })
	start := time.Now()
	var rm metricdata.ResourceMetrics
	// The Prometheus exporter collects with a context that never ends.
	_ = reader.Collect(ctx, &rm)
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Fatalf("collecting the tickets waiting took %v with Redis silent; a scrape must not wait on Redis for more than a second or two", took.Round(time.Millisecond))
	}
}
