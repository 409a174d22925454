package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/telemetry"
)

// FuzzRPCHandler sends arbitrary Connect and gRPC-Web calls (content type,
// encodings, body) to the health service through the same handlers as a
// server's port: whatever the request, the answer is never a server
// fault (HTTP 500, or a Connect or gRPC status internal or unknown) and
// comes in bounded time.
func FuzzRPCHandler(f *testing.F) {
	tel, err := telemetry.New(context.Background(), telemetry.Config{ServiceName: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	s := New(Config{MaxRecvBytes: 4096, MaxSendBytes: 1 << 20, CORSOrigins: []string{"https://app.example"}}, slog.New(slog.DiscardHandler), tel)
	h, err := s.rpcHandler()
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range []struct {
		ct, enc, accept string
		body            []byte
	}{
		{"application/json", "", "", []byte(`{"service":""}`)},
		{"application/json;charset=UTF-8", "", "gzip", []byte(`{}`)},
		{"application/proto", "gzip", "gzip;q=0", []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"application/proto", "", "", []byte{0xff, 0xff}},
		{"application/connect+json", "", "", []byte("\x00\x00\x00\x00\x02{}")},
		{"application/grpc-web+proto", "", "", []byte("\x00\x00\x00\x00\x00")},
		{"application/grpc-web-text", "", "", []byte("AAAAAAA=")},
		{"application/grpc-web-text+proto", "", "", []byte("AAAAAAA=AAAAAAA=")},
		{"application/grpc-web+json", "", "", []byte("\x01\x00\x00\x00\x05hello")},
		{"text/plain", "", "", []byte("hi")},
	} {
		f.Add(c.ct, c.enc, c.accept, c.body)
	}
	f.Fuzz(func(t *testing.T, ct, enc, accept string, body []byte) {
		if len(body) > 64<<10 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/grpc.health.v1.Health/Check", bytes.NewReader(body))
		r.Header.Set("Content-Type", ct)
		if strings.HasPrefix(ct, "application/json") || strings.HasPrefix(ct, "application/proto") {
			r.Header.Set("Connect-Protocol-Version", "1")
		}
		if enc != "" {
			r.Header.Set("Content-Encoding", enc)
			r.Header.Set("Connect-Content-Encoding", enc)
			r.Header.Set("Grpc-Encoding", enc)
		}
		if accept != "" {
			r.Header.Set("Accept-Encoding", accept)
		}
		w := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(w, r)
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("%q %q: answered after %v", ct, enc, d)
		}
		res := w.Result()
		if rct := res.Header.Get("Content-Type"); strings.HasPrefix(rct, "application/grpc") && !strings.HasPrefix(rct, grpcWebBinary) {
			// grpc-go's own answer, passed on untranslated: a recorder
			// cannot stream, and the transcoder gives a gRPC-Web call
			// whose message it could not read to grpc-go with no message
			// at all (Internal, "cardinality violation"). Over a
			// connection the call gets the transcoder's refusal.
			return
		}
		// 505 is grpc-go refusing a gRPC call over HTTP/1.1, as it must.
		if res.StatusCode >= 500 && res.StatusCode != http.StatusServiceUnavailable && res.StatusCode != http.StatusNotImplemented && res.StatusCode != http.StatusHTTPVersionNotSupported {
			t.Fatalf("%q %q %q: HTTP %d %s %q", ct, enc, accept, res.StatusCode, res.Header, w.Body.Bytes())
		}
		if v := res.Header.Get("Grpc-Status"); v == "2" || v == "13" {
			t.Fatalf("%q %q: grpc-status %s %q", ct, enc, v, res.Header.Get("Grpc-Message"))
		}
		var e struct{ Code string }
		if json.Unmarshal(w.Body.Bytes(), &e) == nil && (e.Code == "internal" || e.Code == "unknown") {
			t.Fatalf("%q %q: Connect error %s", ct, enc, w.Body.Bytes())
		}
		// A gRPC-Web answer with a body carries its status in a trailer
		// frame.
		lower := bytes.ToLower(fromText(res.Header.Get("Content-Type"), w.Body.Bytes()))
		for _, fault := range []string{"grpc-status:13\r", "grpc-status: 13\r", "grpc-status:2\r", "grpc-status: 2\r"} {
			if bytes.Contains(lower, []byte(fault)) {
				t.Fatalf("%q %q: %q", ct, enc, w.Body.Bytes())
			}
		}
	})
}

// fromText decodes a grpc-web-text answer, a run of padded base64 chunks,
// four characters at a time: padding only ever ends a group of four.
func fromText(ct string, b []byte) []byte {
	if !strings.HasPrefix(ct, grpcWebText) {
		return b
	}
	var out []byte
	for i := 0; i+4 <= len(b); i += 4 {
		d, err := base64.StdEncoding.DecodeString(string(b[i : i+4]))
		if err != nil {
			return b
		}
		out = append(out, d...)
	}
	return out
}
