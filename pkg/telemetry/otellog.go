package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
)

// HideQuoted wraps the handler of OpenTelemetry's own log (otel.SetLogger),
// which quotes what it cannot read of the OTEL_EXPORTER_OTLP_* variables:
// a header entry, an endpoint, both of which may hold a collector's
// credential, and log shippers carry off. Those values are hidden, and so
// is what an error of net/url quotes of them; the rest of that log (the
// SDK's diagnostics, naming instruments) is shown.
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

// quotingKeys are the keys under which OpenTelemetry's log quotes the
// variables it cannot read (a header's entry, key or value; an endpoint).
var quotingKeys = map[string]bool{"input": true, "url": true, "value": true, "key": true, "header": true, "headers": true, "endpoint": true}

// hideValue hides an attribute that may quote a variable: one of
// quotingKeys, or an error of net/url, whose text quotes the URL or a
// part of it (a password holding a '/' is read up to it as a host and a
// port, which the error quotes).
func hideValue(a slog.Attr) slog.Attr {
	if quotingKeys[a.Key] {
		return slog.String(a.Key, hidden)
	}
	err, ok := a.Value.Resolve().Any().(error)
	if !ok {
		return a
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return slog.String(a.Key, ue.Op+": not a URL "+hidden)
	}
	_, escape := errors.AsType[url.EscapeError](err)
	_, host := errors.AsType[url.InvalidHostError](err)
	if escape || host {
		return slog.String(a.Key, "a bad escape or host "+hidden)
	}
	return a
}

// quotesHeaderKey is what precedes the quoted header key in gRPC's errors
// refusing one.
const quotesHeaderKey = "header key "

// ExportErrorText is an error of the exporter as the process logs it
// (otel.SetErrorHandler), without the header keys gRPC's errors quote: a
// credential pasted into OTEL_EXPORTER_OTLP_HEADERS without its name (a
// bare base64 token, read up to its '=' padding as a key) is one, which
// gRPC refuses at every export.
func ExportErrorText(err error) string {
	text := err.Error()
	var b strings.Builder
	for {
		i := strings.Index(text, quotesHeaderKey)
		if i < 0 {
			break
		}
		i += len(quotesHeaderKey)
		b.WriteString(text[:i])
		text = text[i:]
		if q, err := strconv.QuotedPrefix(text); err == nil {
			b.WriteString(hidden)
			text = text[len(q):]
		}
	}
	b.WriteString(text)
	return b.String()
}
