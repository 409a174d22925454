package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
)

// HideQuoted wraps the handler of OpenTelemetry's own log (otel.SetLogger),
// which quotes what it cannot read of the OTEL_EXPORTER_OTLP_* variables:
// a header entry, an endpoint, both of which may hold a collector's
// credential, and logs shippers carry off. Only an error and a file's
// name are shown of its values, an error without the URL it quotes.
func HideQuoted(h slog.Handler) slog.Handler { return hideQuoted{h} }

type hideQuoted struct{ slog.Handler }

// hidden stands for a value that may hold a credential.
const hidden = "(hidden: it may hold a credential)"

func (h hideQuoted) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(hideValue(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h hideQuoted) WithAttrs(attrs []slog.Attr) slog.Handler {
	shown := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		shown[i] = hideValue(a)
	}
	return hideQuoted{h.Handler.WithAttrs(shown)}
}

func (h hideQuoted) WithGroup(name string) slog.Handler {
	return hideQuoted{h.Handler.WithGroup(name)}
}

// hideValue shows an attribute's value only when it is an error or a
// file's name; an error that quotes a URL (url.Parse's) is shown without
// it.
func hideValue(a slog.Attr) slog.Attr {
	switch a.Key {
	case "file":
		return a
	case "err", "error":
		err, ok := a.Value.Resolve().Any().(error)
		if !ok {
			break
		}
		if ue, ok := errors.AsType[*url.Error](err); ok {
			return slog.String(a.Key, ue.Op+": "+ue.Err.Error())
		}
		return a
	}
	return slog.String(a.Key, hidden)
}
