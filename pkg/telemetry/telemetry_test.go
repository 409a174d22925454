package telemetry

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

func newTelemetry(t *testing.T) *Telemetry {
	t.Helper()
	tel, err := New(context.Background(), Config{ServiceName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return tel
}

// Without a collector no span is recorded, but every span has a trace id
// for the logs, a caller's sampled trace is followed, and the trace
// context reaches the services called (W3C traceparent).
func TestTracesWithoutACollector(t *testing.T) {
	tel := newTelemetry(t)
	tracer := tel.Tracer.Tracer("test")

	_, root := tracer.Start(context.Background(), "root")
	defer root.End()
	if sc := root.SpanContext(); !sc.IsValid() || sc.IsSampled() {
		t.Fatalf("a span of its own: valid %v, sampled %v; want a valid, unsampled one", sc.IsValid(), sc.IsSampled())
	}

	caller := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled, Remote: true,
	})
	ctx, child := tracer.Start(trace.ContextWithRemoteSpanContext(context.Background(), caller), "served")
	defer child.End()
	if sc := child.SpanContext(); sc.TraceID() != caller.TraceID() || !sc.IsSampled() {
		t.Fatalf("a span of a sampled caller's trace: trace %s sampled %v; want %s sampled", sc.TraceID(), sc.IsSampled(), caller.TraceID())
	}

	carrier := propagation.MapCarrier{}
	tel.Propagator.Inject(ctx, carrier)
	if got := carrier.Get("traceparent"); !strings.Contains(got, caller.TraceID().String()) {
		t.Fatalf("traceparent sent on = %q, want one of trace %s", got, caller.TraceID())
	}
}

// /metrics serves the process's own metrics besides the services'.
func TestMetricsServeTheProcess(t *testing.T) {
	tel := newTelemetry(t)
	rec := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(rec.Body.String(), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}
