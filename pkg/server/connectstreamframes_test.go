package server

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// A Connect server-stream request that is not one whole message (an
// empty body, one cut inside its envelope, or bytes after it) is the
// client's fault, as the same body is over gRPC-Web
// (TestCutGRPCWebFramesAreInvalidArgument): it must end invalid_argument,
// not internal, a server fault.
func TestCutConnectStreamRequestsAreInvalidArgument(t *testing.T) {
	addr, _ := startServerWith(t, Config{}, func(s *Server) {
		s.RegisterService(&gamev1.GameService_ServiceDesc, waitingEvents{})
	})
	msg, err := proto.Marshal(&gamev1.StreamEventsRequest{GameId: "g"})
	if err != nil {
		t.Fatal(err)
	}
	framed := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"empty", nil},
		{"inside the envelope", framed[:3]},
		{"inside the message", framed[:len(framed)-2]},
		// grpc-go answered these internal ("cardinality violation",
		// "unexpected EOF").
		{"a second message", append(append([]byte(nil), framed...), framed...)},
		{"a cut second envelope", append(append([]byte(nil), framed...), 0, 0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/StreamEvents", bytes.NewReader(c.body))
			req.Header.Set("Content-Type", "application/connect+proto")
			req.Header.Set("Connect-Protocol-Version", "1")
			resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if len(b) < 5 || b[0] != 2 {
				t.Fatalf("HTTP %d %q: want an end-stream message", resp.StatusCode, b)
			}
			var end struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(b[5:], &end); err != nil {
				t.Fatalf("end-stream %q: %v", b[5:], err)
			}
			if end.Error.Code != "invalid_argument" {
				t.Fatalf("stream ended %q %q; want invalid_argument (the client's fault)", end.Error.Code, end.Error.Message)
			}
		})
	}
}
