package server

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// TestBrokenStreamRequestsAreTheClientsFault: a native gRPC StreamEvents
// call whose message is cut, not the gzip it names, flagged compressed
// with no encoding, flagged unknown or missing is answered Internal by
// grpc-go, which reads it before any code of this server runs and writes
// that status itself. The call log wrote each at ERROR, the level
// operators alert on: any anonymous client could write ERROR lines at
// will. They are logged as the client's faults, at info; on grpc-go's own
// transport and on shared connections alike.
func TestBrokenStreamRequestsAreTheClientsFault(t *testing.T) {
	msg, err := proto.Marshal(&gamev1.StreamEventsRequest{GameId: "g"})
	if err != nil {
		t.Fatal(err)
	}
	good := gzipped(t, msg)
	corrupt := append(append([]byte(nil), good[:10]...), 0xff, 0xff, 0xff, 0xff)
	for _, shared := range []bool{false, true} {
		var logs bytes.Buffer
		var mu sync.Mutex
		log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
		addr, _ := startServerLogging(t, Config{BodyTimeout: 2 * time.Second, SharedConnections: shared}, log, func(s *Server) {
			s.RegisterService(&gamev1.GameService_ServiceDesc, waitingEvents{})
		})
		for _, c := range []struct {
			name, encoding string
			body           []byte
		}{
			{"cut inside the message", "", frameOf(0, msg)[:7]},
			{"corrupt gzip", "gzip", frameOf(1, corrupt)},
			{"not gzip at all", "gzip", frameOf(1, []byte("hello"))},
			{"flagged compressed, no encoding", "", frameOf(1, good)},
			{"unknown frame flags 0x80", "", frameOf(0x80, msg)},
			{"no message", "", nil},
		} {
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/StreamEvents", bytes.NewReader(c.body))
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("Te", "trailers")
			if c.encoding != "" {
				req.Header.Set("Grpc-Encoding", c.encoding)
			}
			resp, err := h2cClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if st := resp.Header.Get("Grpc-Status") + resp.Trailer.Get("Grpc-Status"); st == "0" || st == "" {
				t.Errorf("shared %v, %s: grpc-status %q; want a refusal", shared, c.name, st)
			}
		}
		time.Sleep(100 * time.Millisecond) // the call log's lines
		mu.Lock()
		if strings.Contains(logs.String(), "level=ERROR") || strings.Count(logs.String(), "level=INFO msg=rpc") != 6 {
			t.Errorf("shared %v: want each of 6 broken requests logged once at INFO, none at ERROR:\n%s", shared, logs.String())
		}
		mu.Unlock()
	}
}

// lockedWriter lets a test read a log that a server writes meanwhile.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
