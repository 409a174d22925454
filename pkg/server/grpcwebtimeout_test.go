package server

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// Browser gRPC-Web clients write a call's timeout themselves, in
// milliseconds, from what app code gives: connect-web's grpc-web
// transport sends `${timeoutMs}m` as it is, so 1500.5 sends "1500.5m", and
// a deadline more than about 27.8 hours away (a stream meant to last a
// correspondence game) sends 9 digits where gRPC allows 8. Such a call is
// the client's mistake: connect-go answers InvalidArgument, trailers-only.
// The transcoder answered a bare HTTP 400 in text/plain, which gRPC-Web
// clients (connect-web, Google's grpc-web) read from its status alone as
// INTERNAL, a server fault, with no message the page can show.
func TestAMalformedGRPCWebTimeoutIsAGRPCWebError(t *testing.T) {
	const origin = "http://localhost:5173"
	calls := new(atomic.Int64)
	addr, _ := startServerWith(t, Config{CORSOrigins: []string{origin}}, func(s *Server) {
		s.RegisterService(&gamev1.GameService_ServiceDesc, countingGame{calls: calls})
	})
	msg, err := proto.Marshal(&gamev1.GetGameRequest{GameId: "g"})
	if err != nil {
		t.Fatal(err)
	}
	frame := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
	call := func(t *testing.T, contentType, timeout string) (*http.Response, []byte) {
		t.Helper()
		body := frame
		if contentType == grpcWebText {
			body = []byte(base64.StdEncoding.EncodeToString(frame))
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/GetGame", bytes.NewReader(body))
		req.Header.Set("Origin", origin)
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("X-Grpc-Web", "1")
		req.Header.Set("X-User-Agent", "connect-es/2.0.0")
		req.Header.Set("Grpc-Timeout", timeout)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	for _, ct := range []string{"application/grpc-web+proto", grpcWebText} {
		// What the libraries send for timeouts within gRPC's 8 digits.
		for _, timeout := range []string{"", "1500m", "99999999m", "5S", "2H"} {
			if resp, b := call(t, ct, timeout); resp.StatusCode != http.StatusOK || resp.Header.Get("Grpc-Status") != "" {
				t.Fatalf("%s, Grpc-Timeout %q: HTTP %d, grpc-status %q %q, %q; want the call served", ct, timeout, resp.StatusCode,
					resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message"), b)
			}
		}
		for _, timeout := range []string{"1500.5m", "-5m", "100000000m", "172800000m", "5", "5x", "m"} {
			t.Run(strings.ReplaceAll(ct, "/", "_")+"/"+timeout, func(t *testing.T) {
				before := calls.Load()
				resp, b := call(t, ct, timeout)
				m, _ := url.PathUnescape(resp.Header.Get("Grpc-Message"))
				if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), ct) ||
					resp.Header.Get("Grpc-Status") != "3" || !strings.Contains(m, "Grpc-Timeout") || calls.Load() != before {
					t.Fatalf("Grpc-Timeout %q: HTTP %d %q, grpc-status %q %q, body %q; want HTTP 200 %s, trailers-only grpc-status 3 (InvalidArgument) naming Grpc-Timeout, before the handler",
						timeout, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Grpc-Status"), m, b, ct)
				}
				if resp.Header.Get("Access-Control-Allow-Origin") != origin {
					t.Fatalf("Grpc-Timeout %q: the page may not read the answer (allow-origin %q)", timeout, resp.Header.Get("Access-Control-Allow-Origin"))
				}
			})
		}
	}
}
