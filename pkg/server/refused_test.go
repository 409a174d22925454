package server

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/logging"
)

// TestRefusedRequestsAreNotServerFaults: a Connect request that does not
// decode, or is too large, is answered InvalidArgument or
// ResourceExhausted by the transcoder, and must be counted and logged so,
// not as the Internal that grpc-go, seeing only its request body fail,
// would end the call with: alerting on server faults would page on every
// client that sends bad JSON.
func TestRefusedRequestsAreNotServerFaults(t *testing.T) {
	var logs logging.Buffer
	addr, _ := startServerLogging(t, Config{MaxRecvBytes: 1024}, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), func(s *Server) {
		s.RegisterService(&gamev1.GameService_ServiceDesc, countingGame{calls: new(atomic.Int64)})
	})

	for _, c := range []struct {
		body []byte
		code string
	}{
		{[]byte(`{"gameId":7}`), "invalid_argument"},
		{[]byte(`{"gameId":`), "invalid_argument"},
		{paddedGetGame(2048), "resource_exhausted"},
	} {
		if code, msg := connectCall(t, addr, "application/json", c.body); code != c.code {
			t.Fatalf("GetGame with %.20q: %s %q, want %s", c.body, code, msg, c.code)
		}
	}
	// A stream's request, enveloped as Connect streams are.
	msg := []byte(`{"gameId":7}`)
	env := append([]byte{0, 0, 0, 0, 0}, msg...)
	binary.BigEndian.PutUint32(env[1:5], uint32(len(msg)))
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/StreamEvents", bytes.NewReader(env))
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "invalid_argument") {
		t.Fatalf("StreamEvents with bad JSON: %q, want invalid_argument", b)
	}

	// The metrics count each call with its answer's code, once grpc-go
	// ends it: after the transcoder answered the client.
	var metrics string
	var counted map[string]int
	want := map[string]int{"INVALID_ARGUMENT": 2, "RESOURCE_EXHAUSTED": 1}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		metrics = string(b)
		counted = map[string]int{}
		for line := range strings.SplitSeq(metrics, "\n") {
			if !strings.HasPrefix(line, "rpc_server_call_duration_seconds_count") {
				continue
			}
			for _, code := range []string{"INTERNAL", "UNKNOWN", "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED"} {
				if strings.Contains(line, `"`+code+`"`) {
					counted[code]++
				}
			}
		}
		if maps.Equal(counted, want) {
			break
		}
	}
	if !maps.Equal(counted, want) {
		t.Errorf("metric series by code %v, want %v (INVALID_ARGUMENT for GetGame and StreamEvents, RESOURCE_EXHAUSTED for GetGame), no server fault:\n%s", counted, want, metrics)
	}
	// And the stream's end is logged as the client's fault.
	out := logs.String()
	if strings.Contains(out, "level=ERROR") || !strings.Contains(out, "code=InvalidArgument") {
		t.Errorf("logs, want the refused stream at info with code=InvalidArgument and no error:\n%s", out)
	}
}
