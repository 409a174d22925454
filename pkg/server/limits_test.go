package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/telemetry"
)

// countingGame answers GetGame at once and counts the calls that reach it.
type countingGame struct {
	gamev1.UnimplementedGameServiceServer
	calls *atomic.Int64
}

func (g countingGame) GetGame(_ context.Context, req *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
	g.calls.Add(1)
	id := req.GetGameId()
	if id == "big" {
		id = strings.Repeat("x", 4096)
	}
	return &gamev1.GetGameResponse{Game: &gamev1.Game{GameId: id}}, nil
}

// startCountingGame serves a countingGame and returns its address, a
// client connection to it and the count of calls that reached it.
func startCountingGame(t *testing.T) (string, *grpc.ClientConn, *atomic.Int64) {
	t.Helper()
	calls := new(atomic.Int64)
	addr, _ := startServerWith(t, Config{}, func(s *Server) {
		s.RegisterService(&gamev1.GameService_ServiceDesc, countingGame{calls: calls})
	})
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return addr, cc, calls
}

// paddedGetGame is a valid GetGame request in JSON, made n bytes longer by
// whitespace, which its protobuf form does not keep.
func paddedGetGame(n int) []byte {
	return append(append([]byte(`{"gameId":"g"`), bytes.Repeat([]byte(" "), n)...), '}')
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// gzipBomb is a GetGame request in JSON padded with n MiB of whitespace,
// gzipped: gzip members one after the other make one stream, so a member
// of 1 MiB of spaces, compressed once, is repeated.
func gzipBomb(t *testing.T, n int) []byte {
	t.Helper()
	spaces := gzipped(t, bytes.Repeat([]byte(" "), 1<<20))
	b := gzipped(t, []byte(`{"gameId":"g"`))
	for range n {
		b = append(b, spaces...)
	}
	return append(b, gzipped(t, []byte("}"))...)
}

// connectGetGame calls GetGame over Connect with a JSON body, gzipped
// when encoding says so, and returns the HTTP status and the Connect
// error code ("" on success, when the answer must hold the game).
func connectGetGame(t *testing.T, addr string, body []byte, encoding string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/GetGame", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Code string `json:"code"`
	}
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("HTTP %d: %q is not a Connect error", resp.StatusCode, b)
		}
	} else if !strings.Contains(string(b), `"gameId":"g"`) && !strings.Contains(string(b), `"gameId":"xxxx`) {
		t.Fatalf("answer %q lacks the game", b)
	}
	return resp.StatusCode, e.Code
}

// --max-recv-bytes bounds Connect requests as it bounds native ones: in
// what is read and decompressed, not only in the protobuf it becomes,
// which whitespace in JSON makes as small as one likes. A request over it
// is refused before its handler runs, without the server holding it.
func TestConnectRequestsAreBoundedByMaxRecvBytes(t *testing.T) {
	var calls atomic.Int64
	addr, _ := startServerWith(t, Config{MaxRecvBytes: 1024}, func(s *Server) {
		s.RegisterService(&gamev1.GameService_ServiceDesc, countingGame{calls: &calls})
	})
	for _, c := range []struct {
		name, encoding string
		body           []byte
		ok             bool
	}{
		{"small", "", paddedGetGame(100), true},
		{"small gzip", "gzip", gzipped(t, paddedGetGame(100)), true},
		// Answers are bounded by MaxSendBytes, not MaxRecvBytes.
		{"answer larger than MaxRecvBytes", "", []byte(`{"gameId":"big"}`), true},
		// The limit itself is accepted: {"gameId":"g"} is 14 bytes.
		{"JSON of exactly MaxRecvBytes", "", paddedGetGame(1024 - 14), true},
		{"JSON a byte over MaxRecvBytes", "", paddedGetGame(1024 - 14 + 1), false},
		{"8 MiB of whitespace", "", paddedGetGame(8 << 20), false},
		// Within the transcoder's buffer, which answers share.
		{"4 MiB of whitespace", "", paddedGetGame(4 << 20), false},
		// About 500 bytes: within the limit until decompressed.
		{"gzip to 512 KiB", "gzip", gzipped(t, paddedGetGame(512<<10)), false},
		{"gzip to 256 MiB", "gzip", gzipBomb(t, 256), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := calls.Load()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			code, connectCode := connectGetGame(t, addr, c.body, c.encoding)
			runtime.ReadMemStats(&m1)
			ran := calls.Load() > before
			if c.ok {
				if code != http.StatusOK || !ran {
					t.Fatalf("HTTP %d %q, handler ran %v; want an answer", code, connectCode, ran)
				}
				return
			}
			if connectCode != "resource_exhausted" || ran {
				t.Fatalf("HTTP %d %q, handler ran %v; want resource_exhausted before the handler", code, connectCode, ran)
			}
			// The test's own request body is allocated before m0.
			alloc := m1.TotalAlloc - m0.TotalAlloc
			t.Logf("refusing %d bytes allocated %d KiB", len(c.body), alloc>>10)
			if alloc > 64<<20 {
				t.Fatalf("refusing %d bytes allocated %d MiB", len(c.body), alloc>>20)
			}
		})
	}
}

// Headers are bounded alike over every protocol, far below gRPC's own
// 16 MiB: a call whose metadata is larger is refused before its handler
// runs, one with a credential and cookies' worth of it is served.
func TestHeadersAreBounded(t *testing.T) {
	addr, cc, calls := startCountingGame(t)
	client := gamev1.NewGameServiceClient(cc)
	for _, c := range []struct {
		name string
		size int
		ok   bool
	}{{"16 KiB", 16 << 10, true}, {"128 KiB", 128 << 10, false}} {
		t.Run("grpc "+c.name, func(t *testing.T) {
			before := calls.Load()
			ctx := metadata.AppendToOutgoingContext(context.Background(), "x-padding", strings.Repeat("a", c.size))
			_, err := client.GetGame(ctx, &gamev1.GetGameRequest{GameId: "g"})
			if ran := calls.Load() > before; ran != c.ok || (err == nil) != c.ok {
				t.Fatalf("handler ran %v, err %v; want served %v", ran, err, c.ok)
			}
		})
		t.Run("connect "+c.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/GetGame", strings.NewReader(`{"gameId":"g"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Connect-Protocol-Version", "1")
			req.Header.Set("X-Padding", strings.Repeat("a", c.size))
			before := calls.Load()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if ran := calls.Load() > before; ran != c.ok || (resp.StatusCode == http.StatusOK) != c.ok {
				t.Fatalf("handler ran %v, HTTP %d; want served %v", ran, resp.StatusCode, c.ok)
			}
		})
	}
}

// A Connect request body that is not the gzip its encoding names (empty
// included) is the client's fault: InvalidArgument, not a server fault (HTTP 500, Unknown)
// that a client would retry and an operator be paged for.
func TestCorruptGzipIsInvalidArgument(t *testing.T) {
	tel, err := telemetry.New(context.Background(), telemetry.Config{ServiceName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{}, slog.New(slog.DiscardHandler), tel).rpcHandler()
	if err != nil {
		t.Fatal(err)
	}
	whole := gzipped(t, []byte{})
	for name, body := range map[string][]byte{
		"not gzip":        []byte("0"),
		"cut short":       whole[:len(whole)-4],
		"bad checksum":    append(whole[:len(whole)-8:len(whole)-8], 1, 2, 3, 4, 0, 0, 0, 0),
		"corrupt deflate": append(append([]byte(nil), whole[:10]...), 0xff, 0xff, 0xff, 0xff),
		"empty":           {},
	} {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/grpc.health.v1.Health/Check", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/proto")
			r.Header.Set("Connect-Protocol-Version", "1")
			r.Header.Set("Content-Encoding", "gzip")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			var e struct{ Code, Message string }
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != http.StatusBadRequest || e.Code != "invalid_argument" {
				t.Fatalf("HTTP %d %q; want 400 invalid_argument", w.Code, w.Body.Bytes())
			}
		})
	}
}

// MaxRecvBytes bounds native gRPC requests: one over it is refused
// ResourceExhausted before its handler runs, one within it is served.
func TestGRPCRequestsAreBoundedByMaxRecvBytes(t *testing.T) {
	var calls atomic.Int64
	addr, _ := startServerWith(t, Config{MaxRecvBytes: 1024}, func(s *Server) {
		s.RegisterService(&gamev1.GameService_ServiceDesc, countingGame{calls: &calls})
	})
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := gamev1.NewGameServiceClient(cc)
	for _, c := range []struct {
		size int
		ok   bool
	}{{900, true}, {2048, false}} {
		before := calls.Load()
		_, err := client.GetGame(context.Background(), &gamev1.GetGameRequest{GameId: strings.Repeat("g", c.size)})
		ran := calls.Load() > before
		if c.ok && (err != nil || !ran) {
			t.Fatalf("a %d-byte id: %v, handler ran %v; want served", c.size, err, ran)
		}
		if !c.ok && (status.Code(err) != codes.ResourceExhausted || ran) {
			t.Fatalf("a %d-byte id: %v, handler ran %v; want ResourceExhausted before the handler", c.size, err, ran)
		}
	}
}

// A grpc-web-text request over MaxRecvBytes is refused ResourceExhausted
// before its handler runs, as a binary one is, not taken for bad base64.
func TestGRPCWebTextOverTheLimitIsResourceExhausted(t *testing.T) {
	var calls atomic.Int64
	addr, _ := startServerWith(t, Config{MaxRecvBytes: 1024}, func(s *Server) {
		s.RegisterService(&gamev1.GameService_ServiceDesc, countingGame{calls: &calls})
	})
	msg, err := proto.Marshal(&gamev1.GetGameRequest{GameId: strings.Repeat("g", 2048)})
	if err != nil {
		t.Fatal(err)
	}
	if st, m := grpcWebCall(t, addr, grpcWebText, grpcWebFrame(msg)); st != "8" || calls.Load() != 0 {
		t.Fatalf("grpc-status %q %q, handler ran %v; want 8 (ResourceExhausted) before the handler", st, m, calls.Load() != 0)
	}
}
