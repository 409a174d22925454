package server

import (
	"bytes"
	"compress/gzip"
	"maps"
	"net/http"
	"strconv"
	"strings"
)

// withUnaryGzip compresses the large answers of Connect unary calls for
// clients that accept gzip (browsers always do, and decode it before the
// page sees it). The transcoder hands on only what grpc-go compressed, and
// grpc-go's ServeHTTP transport, which the transcoder calls, never learns
// what the client accepts; so compression is done here, on the HTTP
// answer, as the Connect protocol does it for unary calls. Streams and
// gRPC-Web, which compress message by message, pass untouched.
func withUnaryGzip(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		unary := r.Method == http.MethodGet || isMedia(ct, "application/json") || isMedia(ct, "application/proto")
		if !unary || !acceptsGzip(r.Header.Values("Accept-Encoding")) {
			next.ServeHTTP(w, r)
			return
		}
		bw := &bufferedAnswer{header: w.Header().Clone(), status: http.StatusOK}
		next.ServeHTTP(bw, r)
		bw.finish(w)
	})
}

// acceptsGzip reports whether an Accept-Encoding list takes gzip: named
// with a weight above zero, or none.
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
				continue
			}
			return weight(params) > 0
		}
	}
	return false
}

// weight is the q parameter of an Accept-Encoding entry's parameters, 1
// when it has none; 0 when it cannot be read. Spaces or tabs may stand
// around ";" and "=", and "q" may be written "Q" (RFC 9110 12.4.2).
func weight(params string) float64 {
	for _, p := range strings.Split(params, ";") {
		name, value, _ := strings.Cut(p, "=")
		if !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		w, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0
		}
		return w
	}
	return 1
}

// bufferedAnswer holds a unary answer until it is complete, to compress it
// when it is worth it. Its headers are those at the first WriteHeader or
// Write, as a real answer's are: the transcoder answers a request it
// refuses itself (malformed, too large) at once, and grpc-go, handed no
// message, sets gRPC headers (Content-Type application/grpc+proto,
// Grpc-Status) after it, which net/http would ignore.
type bufferedAnswer struct {
	header http.Header
	// sent is header as it was when the answer began; nil until then.
	sent   http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedAnswer) Header() http.Header { return b.header }

func (b *bufferedAnswer) WriteHeader(status int) {
	if b.sent != nil {
		return
	}
	b.status = status
	b.sent = b.header.Clone()
}

func (b *bufferedAnswer) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

// Flush does nothing: a unary answer goes out whole, in finish. The
// transcoder needs a writer that can flush.
func (b *bufferedAnswer) Flush() {}

// finish writes the answer to w, gzip-compressed when it is large and not
// encoded already.
func (b *bufferedAnswer) finish(w http.ResponseWriter) {
	b.WriteHeader(b.status)
	h := w.Header()
	clear(h)
	maps.Copy(h, b.sent)
	h.Add("Vary", "Accept-Encoding")
	body := b.body.Bytes()
	if len(body) >= compressFrom && h.Get("Content-Encoding") == "" {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		if _, err := zw.Write(body); err == nil && zw.Close() == nil {
			h.Set("Content-Encoding", "gzip")
			body = z.Bytes()
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(b.status)
	_, _ = w.Write(body)
}

// isMedia reports whether a Content-Type is the media type, with or
// without parameters.
func isMedia(contentType, media string) bool {
	rest, ok := strings.CutPrefix(contentType, media)
	return ok && (rest == "" || rest[0] == ';')
}
