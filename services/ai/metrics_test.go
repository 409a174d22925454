package ai

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/palacehq/palace/pkg/aijobs"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestAIHistogramsTellSecondsApart: a job taken after 20 ms and one after
// 2 s, or a move found in 3 ms and one in 4 s, fall in different buckets,
// so that the quantiles an operator scales workers on say something.
func TestAIHistogramsTellSecondsApart(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("t")
	m, err := newMetrics(meter, aijobs.New(redistest.Client(t), redistest.Prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, s := range []float64{0.02, 2} {
		m.Wait.Record(ctx, s)
	}
	for _, s := range []float64{0.003, 4} {
		m.Think.Record(ctx, s)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			h, ok := mt.Data.(metricdata.Histogram[float64])
			if !ok {
				continue
			}
			seen++
			for _, dp := range h.DataPoints {
				for i, n := range dp.BucketCounts {
					if n > 1 {
						t.Errorf("%s: both values in bucket %d of bounds %v", mt.Name, i, dp.Bounds)
					}
				}
			}
		}
	}
	if seen != 2 {
		t.Fatalf("found %d histograms; want palace_ai_job_wait_seconds and palace_ai_think_seconds", seen)
	}
}
