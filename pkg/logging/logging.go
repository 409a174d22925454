// Package logging builds the slog loggers every Palace process uses. Each
// record logged with a context carries the trace id of the span in that
// context, so one request can be followed across services in the logs.
package logging

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// New returns a logger writing to w in the given format ("json" or "text")
// at the given level ("debug", "info", "warn", "error").
func New(w io.Writer, format, level string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: ParseLevel(level)}
	var h slog.Handler
	if strings.EqualFold(format, "json") {
		opts.ReplaceAttr = readableDuration
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(QuietRepeats(WithTraceID(h)))
}

// ParseLevel maps a level name to a slog level; unknown names mean info.
func ParseLevel(s string) slog.Level {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug
	case "warn", "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// WithTraceID wraps h so that records carry trace_id and span_id when
// their context holds a valid span.
func WithTraceID(h slog.Handler) slog.Handler { return traceHandler{h} }

type traceHandler struct{ slog.Handler }

func (t traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return t.Handler.Handle(ctx, r)
}

func (t traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{t.Handler.WithAttrs(as)}
}

func (t traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{t.Handler.WithGroup(name)}
}

// Discard returns a logger that drops everything, for tests that do not
// look at logs.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// readableDuration writes a duration as the text handler does ("1.5s"),
// where JSON would have integer nanoseconds that nobody reads at a glance
// in an incident.
func readableDuration(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
