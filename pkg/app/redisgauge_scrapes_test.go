package app

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/palacehq/palace/pkg/redistest"
)

// TestTheRedisGaugeReadsOneOnScrapesBackToBack: palace_redis_reachable,
// which operators alert on, read 0 on scrapes that followed one another
// closely (two Prometheus replicas, a retry) while Redis answered every
// ping: the last scrape's read was still taken for one under way.
func TestTheRedisGaugeReadsOneOnScrapesBackToBack(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(ctx) })
	if err := registerRedisReachable(mp.Meter("t"), redistest.Client(t)); err != nil {
		t.Fatal(err)
	}
	const scrapes = 2000
	zeros := 0
	for range scrapes {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if g, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == "palace_redis_reachable" {
					for _, dp := range g.DataPoints {
						if dp.Value == 0 {
							zeros++
						}
					}
				}
			}
		}
	}
	if zeros > 0 {
		t.Fatalf("palace_redis_reachable read 0 on %d of %d scrapes while Redis answered every ping", zeros, scrapes)
	}
}
