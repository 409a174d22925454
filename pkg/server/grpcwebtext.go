package server

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
)

// Google's grpc-web library streams server answers only in its text mode
// (application/grpc-web-text): the same frames as binary gRPC-Web, in
// base64. The transcoder speaks binary gRPC-Web only, so text calls are
// translated on the way: the request body is decoded, and every write of
// the answer is sent as a padded base64 chunk, which the client decodes
// chunk by chunk, so that each event of a stream arrives when it is sent.

const (
	grpcWebBinary = "application/grpc-web"
	grpcWebText   = "application/grpc-web-text"
)

// withGRPCWebText serves grpc-web-text calls through next, which serves
// binary gRPC-Web; other requests pass unchanged. A request holds one
// message of at most maxRecv bytes (gRPC-Web has no client streaming), so
// it is decoded whole: a body that is not base64 is refused as such.
func withGRPCWebText(next http.Handler, maxRecv int) http.Handler {
	limit := int64(base64.StdEncoding.EncodedLen(maxRecv+5)) + 1
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.Header.Get("Content-Type"), grpcWebText)
		if !ok || (rest != "" && rest[0] != '+' && rest[0] != ';') {
			next.ServeHTTP(w, r)
			return
		}
		binary := r.Clone(r.Context())
		binary.Header.Set("Content-Type", grpcWebBinary+rest)
		if accept := binary.Header.Get("Accept"); strings.HasPrefix(accept, grpcWebText) {
			binary.Header.Set("Accept", grpcWebBinary+strings.TrimPrefix(accept, grpcWebText))
		}
		text, err := io.ReadAll(io.LimitReader(r.Body, limit))
		if err != nil {
			grpcWebTextError(w, codes.Unavailable, "reading the request: "+err.Error())
			return
		}
		if int64(len(text)) == limit {
			grpcWebTextError(w, codes.ResourceExhausted, "the request is larger than the server accepts")
			return
		}
		body, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(text)))
		if err != nil {
			grpcWebTextError(w, codes.InvalidArgument, "a grpc-web-text request body must be base64: "+err.Error())
			return
		}
		binary.Body = io.NopCloser(bytes.NewReader(body))
		binary.ContentLength = int64(len(body))
		next.ServeHTTP(&textWriter{ResponseWriter: w}, binary)
	})
}

// grpcWebTextError answers trailers-only, the status in the headers.
func grpcWebTextError(w http.ResponseWriter, code codes.Code, msg string) {
	grpcWebError(w, grpcWebText+"+proto", code, msg)
}

// textWriter sends a binary gRPC-Web answer as grpc-web-text.
type textWriter struct {
	http.ResponseWriter
	wroteHeader bool
}

func (t *textWriter) WriteHeader(code int) {
	if t.wroteHeader {
		return
	}
	t.wroteHeader = true
	h := t.Header()
	if ct, ok := strings.CutPrefix(h.Get("Content-Type"), grpcWebBinary); ok {
		h.Set("Content-Type", grpcWebText+ct)
	}
	h.Del("Content-Length") // base64 is longer
	t.ResponseWriter.WriteHeader(code)
}

func (t *textWriter) Write(b []byte) (int, error) {
	t.WriteHeader(http.StatusOK)
	if len(b) == 0 {
		return 0, nil
	}
	if _, err := io.WriteString(t.ResponseWriter, base64.StdEncoding.EncodeToString(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Flush sends what was written, as the transcoder does after each message
// of a stream.
func (t *textWriter) Flush() {
	t.WriteHeader(http.StatusOK)
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (t *textWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }
