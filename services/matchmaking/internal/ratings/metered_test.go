package ratings

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
)

// TestARepeatedAbortIsMeteredAsADuplicate: an abort delivered twice (a
// lease changing hands) is metered once as aborted, then as a duplicate,
// as a rated game delivered twice is.
func TestARepeatedAbortIsMeteredAsADuplicate(t *testing.T) {
	f := newFixture(t)
	reader := sdkmetric.NewManualReader()
	c, err := New(Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)), f.store, f.env.Client, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("t"))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := f.ratedGame(t, "gina", "hal", true)
	res := &commonv1.Result{Method: commonv1.EndMethod_END_METHOD_ABORTED}
	for range 2 {
		if err := c.Settle(context.Background(), p, res, commonv1.Side_SIDE_FIRST, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range s.DataPoints {
					v, _ := dp.Attributes.Value(attribute.Key("result"))
					got[v.AsString()] += dp.Value
				}
			}
		}
	}
	if got["aborted"] != 1 || got["duplicate"] != 1 {
		t.Fatalf("metered %v; want aborted 1, duplicate 1", got)
	}
}
