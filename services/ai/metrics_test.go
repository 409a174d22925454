package ai

import (
	"context"
	"maps"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/palacehq/palace/pkg/aijobs"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/redisx"
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

// TestAIQueueGaugesCountTheirJobs: the queue depth an operator scales on
// counts the jobs waiting in each lane, and the dead-letter gauge the jobs
// given up.
func TestAIQueueGaugesCountTheirJobs(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() {
		rdb.Del(ctx, prefix+"{ai}:jobs", prefix+"{ai}:jobs:background", prefix+"{ai}:dead", prefix+"{ai}:lanes")
	})
	q := aijobs.New(rdb, prefix)
	if err := q.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.ReadBothLanes(ctx); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"g1", "g2", "bots"} {
		if err := q.Enqueue(ctx, aijobs.Job{GameID: g, Version: 1, Kind: aijobs.KindMove, Side: "second", Level: 1, Background: g == "bots"}); err != nil {
			t.Fatal(err)
		}
	}
	reader := sdkmetric.NewManualReader()
	if _, err := newMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("t"), q); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			g, ok := mt.Data.(metricdata.Gauge[int64])
			if !ok {
				continue
			}
			for _, dp := range g.DataPoints {
				name := mt.Name
				if lane, ok := dp.Attributes.Value("lane"); ok {
					name += "/" + lane.AsString()
				}
				got[name] += dp.Value
			}
		}
	}
	want := map[string]int64{"palace_ai_queue_depth/interactive": 2, "palace_ai_queue_depth/background": 1, "palace_ai_dead_jobs": 0}
	if !maps.Equal(got, want) {
		t.Fatalf("gauges %v; want %v", got, want)
	}
}

// TestAIQueueGaugesDoNotHoldAScrapeOnASilentRedis: a Redis that stalls
// (its machine frozen, its link cut without a reset) must not hold a
// scrape of /metrics past Prometheus' timeout, or the scrape fails whole:
// palace_redis_reachable, the gauge an operator alerts on for exactly
// this, is never seen, nor is any other metric of the process.
func TestAIQueueGaugesDoNotHoldAScrapeOnASilentRedis(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Own(t)
	rdb, err := redisx.New(ctx, srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	reader := sdkmetric.NewManualReader()
	if _, err := newMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("t"), aijobs.New(rdb, "")); err != nil {
		t.Fatal(err)
	}
	srv.Pause(t)
	t.Cleanup(func() { srv.Resume(t) })
	start := time.Now()
	var rm metricdata.ResourceMetrics
	// The Prometheus exporter collects with a context that never ends.
	_ = reader.Collect(ctx, &rm)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("collecting the AI gauges took %v with Redis silent; a scrape must not wait on Redis for more than a second or two", took.Round(time.Millisecond))
	}
}
