package server

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
)

// textFrames reads grpc-web-text from r: padded base64 chunks, read in
// groups of four characters as the grpc-web library does, holding
// gRPC-Web frames. It returns once it has n frames.
func textFrames(t *testing.T, r *bufio.Reader, n int) (frames [][]byte, flags []byte) {
	t.Helper()
	var buf []byte
	quad := make([]byte, 4)
	for len(frames) < n {
		if _, err := io.ReadFull(r, quad); err != nil {
			t.Fatalf("after %d frames: %v", len(frames), err)
		}
		dec := make([]byte, 3)
		k, err := base64.StdEncoding.Decode(dec, quad)
		if err != nil {
			t.Fatalf("not base64: %q: %v", quad, err)
		}
		buf = append(buf, dec[:k]...)
		for len(buf) >= 5 {
			size := int(binary.BigEndian.Uint32(buf[1:5]))
			if len(buf) < 5+size {
				break
			}
			flags = append(flags, buf[0])
			frames = append(frames, buf[5:5+size])
			buf = buf[5+size:]
		}
	}
	return frames, flags
}

func grpcWebTextCall(ctx context.Context, t *testing.T, addr, method string, req proto.Message) *http.Response {
	t.Helper()
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	frame := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b))), b...)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+method, strings.NewReader(base64.StdEncoding.EncodeToString(frame)))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Content-Type", "application/grpc-web-text")
	hr.Header.Set("Accept", "application/grpc-web-text")
	hr.Header.Set("X-Grpc-Web", "1")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/grpc-web-text") {
		t.Fatalf("%s: %d %q", method, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp
}

// TestGRPCWebTextCalls: Google's grpc-web library in its text mode (the
// only one in which it streams) gets a unary answer with its trailers,
// and a stream's first message while the stream is still open.
func TestGRPCWebTextCalls(t *testing.T) {
	addr, _ := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := grpcWebTextCall(ctx, t, addr, "/grpc.health.v1.Health/Check", &healthpb.HealthCheckRequest{})
	frames, flags := textFrames(t, bufio.NewReader(resp.Body), 2)
	var got healthpb.HealthCheckResponse
	if err := proto.Unmarshal(frames[0], &got); err != nil || flags[0] != 0 || got.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check over grpc-web-text: %v (flags %x, %v)", &got, flags[0], err)
	}
	if flags[1] != 0x80 || !strings.Contains(strings.ToLower(string(frames[1])), "grpc-status: 0") {
		t.Fatalf("trailers over grpc-web-text: flags %x, %q", flags[1], frames[1])
	}
	// Watch never ends: its first message must come through before.
	resp = grpcWebTextCall(ctx, t, addr, "/grpc.health.v1.Health/Watch", &healthpb.HealthCheckRequest{})
	frames, _ = textFrames(t, bufio.NewReader(resp.Body), 1)
	if err := proto.Unmarshal(frames[0], &got); err != nil || got.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch over grpc-web-text: %v (%v)", &got, err)
	}
}

// TestGRPCWebTextRefusesBadBase64: a body that is not base64 is refused
// with a gRPC status, not served as something else.
func TestGRPCWebTextRefusesBadBase64(t *testing.T) {
	addr, _ := startServer(t)
	hr, err := http.NewRequest(http.MethodPost, "http://"+addr+"/grpc.health.v1.Health/Check", strings.NewReader("not base64!"))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Content-Type", "application/grpc-web-text")
	hr.Header.Set("X-Grpc-Web", "1")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	status := resp.Header.Get("Grpc-Status")
	if status == "" {
		// Not trailers-only: the status is in the trailer frame.
		frames, flags := textFrames(t, bufio.NewReader(strings.NewReader(string(body))), 1)
		if flags[0] != 0x80 {
			t.Fatalf("bad base64 answered with a message: %q", frames[0])
		}
		status = string(frames[0])
	}
	if status != "3" || !strings.Contains(resp.Header.Get("Grpc-Message"), "base64") {
		t.Fatalf("bad base64: HTTP %d, status %q %q; want InvalidArgument (3) saying why", resp.StatusCode, status, resp.Header.Get("Grpc-Message"))
	}
}
