package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// JSON logs write durations as text ("1.5s"), as text logs do, not as
// integer nanoseconds.
func TestJSONDurationsAreReadable(t *testing.T) {
	var buf bytes.Buffer
	New(&buf, "json", "info").Info("waited", "waited", 1500*time.Millisecond)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["waited"] != "1.5s" {
		t.Fatalf("waited = %v (%T), want %q", rec["waited"], rec["waited"], "1.5s")
	}
}

// Every record logged with a span's context carries its trace and span
// ids, whether or not the span is sampled (without a collector none is),
// through the attributes and groups a logger was given too.
func TestRecordsCarryTheTraceID(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
		SpanID:  trace.SpanID{0x00, 0xf0, 1, 2, 3, 4, 5, 6},
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	for name, log := range map[string]func(*slog.Logger) *slog.Logger{
		"plain":      func(l *slog.Logger) *slog.Logger { return l },
		"with":       func(l *slog.Logger) *slog.Logger { return l.With("service", "game") },
		"with group": func(l *slog.Logger) *slog.Logger { return l.WithGroup("g") },
	} {
		var buf bytes.Buffer
		log(New(&buf, "json", "info")).InfoContext(ctx, "served")
		out := buf.String()
		if !strings.Contains(out, sc.TraceID().String()) || !strings.Contains(out, sc.SpanID().String()) {
			t.Errorf("%s: %s lacks trace id %s or span id %s", name, out, sc.TraceID(), sc.SpanID())
		}
	}
}

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "INFO": slog.LevelInfo, "warn": slog.LevelWarn, "Warning": slog.LevelWarn,
		"ERROR": slog.LevelError, "loud": slog.LevelInfo,
	} {
		if got := ParseLevel(in); got != want {
			t.Errorf("ParseLevel(%q) = %v, want %v", in, got, want)
		}
	}
}

// A process's logger writes the format asked for, whatever its case, and
// counts repeated warnings rather than writing each.
func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, "JSON", "warn")
	log.Info("dropped")
	for range 3 {
		log.Warn("redis out of reach")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !json.Valid([]byte(lines[0])) {
		t.Fatalf("logged %q; want one JSON line of the warning", buf.String())
	}
}
