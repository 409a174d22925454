package server

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// A large Connect unary answer goes gzip-compressed to a client that
// accepts gzip, and decodes to the same answer; a small one, one for a
// client that does not accept gzip, and a gRPC-Web answer (which
// compresses message by message) go as they are.
func TestLargeConnectAnswersAreCompressed(t *testing.T) {
	var calls atomic.Int64
	addr, _ := startServerWith(t, Config{}, func(s *Server) {
		s.RegisterService(&gamev1.GameService_ServiceDesc, countingGame{calls: &calls})
	})
	call := func(contentType, accept string, body []byte) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/GetGame", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Connect-Protocol-Version", "1")
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
		}
		resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	for _, accept := range []string{"gzip, deflate", "deflate, gzip;q=0.5"} {
		if resp, _ := call("application/json", accept, []byte(`{"gameId":"big"}`)); resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("a large answer, Accept-Encoding %q: Content-Encoding %q, want gzip", accept, resp.Header.Get("Content-Encoding"))
		}
	}
	resp, b := call("application/json", "gzip, deflate", []byte(`{"gameId":"big"}`))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
		t.Fatalf("a large answer, gzip accepted: HTTP %d, Content-Encoding %q, Vary %q", resp.StatusCode, resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil || !strings.Contains(string(plain), `"gameId":"xxxx`) || len(b) >= len(plain)/4 {
		t.Fatalf("the compressed answer (%d bytes) decodes to %d bytes, %v", len(b), len(plain), err)
	}
	for _, c := range []struct {
		name, contentType, accept string
		body                      []byte
	}{
		{"a small answer", "application/json", "gzip", []byte(`{"gameId":"g"}`)},
		{"gzip not accepted", "application/json", "", []byte(`{"gameId":"big"}`)},
		{"gzip refused", "application/json", "gzip;q=0", []byte(`{"gameId":"big"}`)},
		{"gzip refused, weight written long", "application/json", "gzip; q=0.000", []byte(`{"gameId":"big"}`)},
		{"gRPC-Web", "application/grpc-web+proto", "gzip", grpcWebFrame([]byte("\x0a\x03big"))},
	} {
		resp, b := call(c.contentType, c.accept, c.body)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "" || len(b) == 0 {
			t.Fatalf("%s: HTTP %d, Content-Encoding %q, %d bytes; want it as it is", c.name, resp.StatusCode, resp.Header.Get("Content-Encoding"), len(b))
		}
	}
}

// grpcWebFrame is msg in a gRPC-Web data frame.
func grpcWebFrame(msg []byte) []byte {
	f := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(f[1:], uint32(len(msg)))
	return append(f, msg...)
}

// A Connect unary call the transcoder refuses before grpc-go reads it (a
// malformed or oversized JSON message) is answered as a Connect error, in
// JSON, also for a client that accepts gzip, as every browser does: the
// answer is buffered for compression, and grpc-go, handed no message, sets
// gRPC headers after the refusal was written, which must not reach the
// client. With them, a Connect client found a gRPC content type and took
// the HTTP status alone: a message over the limit became Unavailable,
// which clients retry, and a malformed one Internal.
func TestRefusedConnectUnaryKeepsItsAnswerWithGzip(t *testing.T) {
	var calls atomic.Int64
	addr, _ := startServerWith(t, Config{MaxRecvBytes: 1 << 10}, func(s *Server) {
		s.RegisterService(&gamev1.GameService_ServiceDesc, countingGame{calls: &calls})
	})
	for _, c := range []struct {
		name       string
		body       []byte
		wantStatus int
		wantCode   string
	}{
		{"malformed JSON", []byte(`{"gameId":`), http.StatusBadRequest, "invalid_argument"},
		{"a field of the wrong type", []byte(`{"gameId":5}`), http.StatusBadRequest, "invalid_argument"},
		{"over the size limit", paddedGetGame(4 << 10), http.StatusTooManyRequests, "resource_exhausted"},
	} {
		for _, accept := range []string{"", "gzip, deflate, br, zstd"} {
			req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/GetGame", bytes.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Connect-Protocol-Version", "1")
			if accept != "" {
				req.Header.Set("Accept-Encoding", accept)
			}
			resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			var got struct{ Code string }
			_ = json.Unmarshal(b, &got)
			if resp.StatusCode != c.wantStatus || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Grpc-Status") != "" || got.Code != c.wantCode {
				t.Errorf("%s, Accept-Encoding %q: HTTP %d, Content-Type %q, Grpc-Status %q, body %s; want HTTP %d, application/json, no Grpc-Status, code %s",
					c.name, accept, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Grpc-Status"), b, c.wantStatus, c.wantCode)
			}
		}
	}
}

// A refusal written "gzip;Q=0", or with a tab around ";", was read as
// taking gzip, and "gzip;q=0.5;x=1" as refusing it: spaces and tabs may
// stand around ";" and "=", and "q" is read in either case.
func TestAcceptsGzipReadsEveryWeightSpelling(t *testing.T) {
	for v, want := range map[string]bool{
		"gzip": true, "gzip;": true, "GZIP;q=1": true, "deflate, gzip;q=0.5": true, "gzip;q=0.5;x=1": true, "gzip ; Q = 0.2": true,
		"gzip;q=0": false, "gzip;Q=0": false, "gzip;\tq=0": false, "gzip;Q=0.000": false, "deflate, gzip ;\tq=0": false,
		"gzip;q=nope": false, "deflate": false, "": false,
	} {
		if got := acceptsGzip([]string{v}); got != want {
			t.Errorf("Accept-Encoding %q: takes gzip %v, want %v", v, got, want)
		}
	}
}
