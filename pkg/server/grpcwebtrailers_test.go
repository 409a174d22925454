package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// failingEvents sends one message, then ends the stream Unavailable, as a
// stopping server does.
type failingEvents struct {
	gamev1.UnimplementedGameServiceServer
}

func (failingEvents) StreamEvents(_ *gamev1.StreamEventsRequest, ss gamev1.GameService_StreamEventsServer) error {
	if err := ss.Send(&gamev1.StreamEventsResponse{}); err != nil {
		return err
	}
	return status.Error(codes.Unavailable, "server is shutting down: reconnect and resume")
}

// wantLowerTrailer checks a trailer frame: lower-case names (as the
// gRPC-Web protocol asks, and Google's grpc-web library reads) holding
// Unavailable.
func wantLowerTrailer(t *testing.T, flag byte, frame []byte) {
	t.Helper()
	if flag != 0x80 {
		t.Fatalf("the last frame has flags %x, want a trailer frame", flag)
	}
	fields := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(frame)), "\r\n") {
		name, value, _ := strings.Cut(line, ":")
		if name != strings.ToLower(name) {
			t.Errorf("trailer name %q is not lower case (frame %q)", name, frame)
		}
		fields[name] = strings.TrimSpace(value)
	}
	if fields["grpc-status"] != "14" || !strings.Contains(fields["grpc-message"], "reconnect") {
		t.Fatalf("trailer frame %q: want grpc-status 14 and its message", frame)
	}
}

// A gRPC-Web stream that ends in an error after a message ends with a
// trailer frame whose names are lower-case, in binary and text mode.
func TestGRPCWebTrailersAreLowerCase(t *testing.T) {
	addr, _ := startServerWith(t, Config{}, func(s *Server) {
		s.RegisterService(&gamev1.GameService_ServiceDesc, failingEvents{})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const method = "/palace.game.v1.GameService/StreamEvents"

	b, err := proto.Marshal(&gamev1.StreamEventsRequest{GameId: "g"})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+method,
		bytes.NewReader(append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b))), b...)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc-web+proto")
	req.Header.Set("X-Grpc-Web", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var flags []byte
	var frames [][]byte
	for len(body) >= 5 {
		size := int(binary.BigEndian.Uint32(body[1:5]))
		if len(body) < 5+size {
			t.Fatalf("a truncated frame: %q", body)
		}
		flags, frames = append(flags, body[0]), append(frames, body[5:5+size])
		body = body[5+size:]
	}
	if len(frames) != 2 || len(body) != 0 {
		t.Fatalf("binary: %d frames and %d bytes more, want a message and the trailers", len(frames), len(body))
	}
	wantLowerTrailer(t, flags[1], frames[1])

	text := grpcWebTextCall(ctx, t, addr, method, &gamev1.StreamEventsRequest{GameId: "g"})
	frames, flags = textFrames(t, bufio.NewReader(text.Body), 2)
	wantLowerTrailer(t, flags[1], frames[1])
}

// The trailer frame is found however the writes cut the frames.
func TestTrailerWriterTakesAnyCut(t *testing.T) {
	msg := append(binary.BigEndian.AppendUint32([]byte{0}, 3), "abc"...)
	empty := binary.BigEndian.AppendUint32([]byte{0}, 0)
	trailer := "Grpc-Status: 14\r\nGrpc-Message: x:Y\r\n"
	stream := append(append(append([]byte{}, msg...), empty...), append(binary.BigEndian.AppendUint32([]byte{0x80}, uint32(len(trailer))), trailer...)...)
	want := strings.Replace(strings.Replace(string(stream), "Grpc-Status", "grpc-status", 1), "Grpc-Message", "grpc-message", 1)
	for cut := 1; cut <= len(stream); cut++ {
		rec := httptest.NewRecorder()
		w := &trailerWriter{ResponseWriter: rec}
		for rest := stream; len(rest) > 0; {
			k := min(cut, len(rest))
			if n, err := w.Write(rest[:k]); n != k || err != nil {
				t.Fatalf("cut %d: Write = %d, %v", cut, n, err)
			}
			rest = rest[k:]
		}
		if got := rec.Body.String(); got != want {
			t.Fatalf("cut %d: wrote %q, want %q", cut, got, want)
		}
	}
}
