package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// slowEvents sends a message, waits, and sends another: a stream that
// lasts longer than a request body may take to arrive.
type slowEvents struct {
	gamev1.UnimplementedGameServiceServer
	calls *atomic.Int64
	pause time.Duration
}

func (s slowEvents) GetGame(context.Context, *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
	s.calls.Add(1)
	return &gamev1.GetGameResponse{Game: &gamev1.Game{GameId: "g"}}, nil
}

func (s slowEvents) StreamEvents(_ *gamev1.StreamEventsRequest, ss gamev1.GameService_StreamEventsServer) error {
	s.calls.Add(1)
	for i := range 2 {
		if i > 0 {
			time.Sleep(s.pause)
			if err := ss.Context().Err(); err != nil {
				return err // the server gave the call up
			}
		}
		if err := ss.Send(&gamev1.StreamEventsResponse{}); err != nil {
			return err
		}
	}
	return nil
}

// trickle sends a request's headers and the first part of its body over
// HTTP/1.1, then nothing more, and returns the answer's status line,
// headers and body.
func trickle(t *testing.T, addr, contentType string, body []byte, sent int) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST /palace.game.v1.GameService/GetGame HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnect-Protocol-Version: 1\r\n\r\n", addr, contentType, len(body))
	if _, err := conn.Write(body[:sent]); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s: no answer to a body that stopped coming: %v", contentType, err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestABodyThatStopsComingIsRefused: a call whose body stops part way is
// answered DeadlineExceeded once Config.BodyTimeout has passed, in each
// protocol, without reaching the service; a stream that outlasts the
// timeout once its request has come goes on.
func TestABodyThatStopsComingIsRefused(t *testing.T) {
	const timeout = 300 * time.Millisecond
	calls := new(atomic.Int64)
	addr, _ := startServerWith(t, Config{BodyTimeout: timeout}, func(s *Server) {
		s.RegisterService(&gamev1.GameService_ServiceDesc, slowEvents{calls: calls, pause: 3 * timeout})
	})
	msg, err := proto.Marshal(&gamev1.GetGameRequest{GameId: "some-game-id"})
	if err != nil {
		t.Fatal(err)
	}
	framed := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)

	resp, body := trickle(t, addr, "application/json", []byte(`{"gameId":"some-game-id"}`), 10)
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, "deadline_exceeded") || !strings.Contains(body, "did not arrive") {
		t.Fatalf("Connect: %s %q, want 504 deadline_exceeded saying the body did not arrive", resp.Status, body)
	}
	resp, _ = trickle(t, addr, "application/grpc-web+proto", framed, 7)
	if got := resp.Header.Get("Grpc-Status"); got != "4" {
		t.Fatalf("gRPC-Web: grpc-status %q (%s), want 4 (DeadlineExceeded)", got, resp.Header.Get("Grpc-Message"))
	}
	text := []byte(base64.StdEncoding.EncodeToString(framed))
	resp, _ = trickle(t, addr, "application/grpc-web-text+proto", text, 8)
	if got := resp.Header.Get("Grpc-Status"); got != "4" {
		t.Fatalf("gRPC-Web text: grpc-status %q (%s), want 4 (DeadlineExceeded)", got, resp.Header.Get("Grpc-Message"))
	}
	// Over HTTP/2 too: the body of one stream stops coming.
	pr, pw := io.Pipe()
	defer pw.Close()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/GetGame", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	go func() { _, _ = pw.Write([]byte(`{"gameId":`)) }()
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: &h2c}, Timeout: 10 * time.Second}
	h2, err := client.Do(req)
	if err != nil {
		t.Fatalf("HTTP/2: no answer to a body that stopped coming: %v", err)
	}
	b, _ := io.ReadAll(h2.Body)
	h2.Body.Close()
	if h2.ProtoMajor != 2 || h2.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(b), "did not arrive") {
		t.Fatalf("HTTP/2: %s %s %q, want 504 saying the body did not arrive", h2.Proto, h2.Status, b)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d calls reached the service", n)
	}

	// A whole body is served, and a stream outlives the timeout.
	resp, body = trickle(t, addr, "application/json", []byte(`{"gameId":"some-game-id"}`), 25)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"gameId":"g"`) {
		t.Fatalf("a whole body: %s %q", resp.Status, body)
	}
	req, err = http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/StreamEvents", bytes.NewReader([]byte("\x00\x00\x00\x00\x02{}")))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/connect+json")
	stream, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(stream.Body)
	stream.Body.Close()
	if err != nil || stream.StatusCode != http.StatusOK || bytes.Count(all, []byte("\x00\x00\x00\x00\x02{}")) != 2 || bytes.Contains(all, []byte("error")) {
		t.Fatalf("a stream lasting %v: %s %q %v, want both its messages and no error", 3*timeout, stream.Status, all, err)
	}
}

// TestAnUnreadHTTP1BodyThatNeverComesHoldsNoConnection: an HTTP/1.1
// request whose declared body never comes, to a path answered without
// reading it (GET /metrics, a Connect GET, a CORS preflight, a PUT to a
// method), held its connection and handler for ever. net/http reads the
// unread body (up to 256 KiB) before it writes the answer's headers, with
// no read deadline once the headers are in, and the body timeout (500 ms
// here) bounded only POST bodies: the server neither answered nor closed
// the connection, and its graceful stop waited for the handler until the
// shutdown timeout cut it off.
func TestAnUnreadHTTP1BodyThatNeverComesHoldsNoConnection(t *testing.T) {
	addr, stop := startServerWith(t, Config{BodyTimeout: 500 * time.Millisecond, ShutdownTimeout: 4 * time.Second,
		CORSOrigins: []string{"https://play.example.com"}}, func(s *Server) {
		s.RegisterService(&gamev1.GameService_ServiceDesc, slowEvents{calls: new(atomic.Int64)})
	})
	requests := map[string]string{
		"GET /metrics":    "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n",
		"Connect GET":     "GET /palace.game.v1.GameService/GetGame?encoding=json&message=%7B%7D HTTP/1.1\r\nHost: x\r\nConnect-Protocol-Version: 1\r\nContent-Length: 10\r\n\r\n",
		"preflight":       "OPTIONS /palace.game.v1.GameService/GetGame HTTP/1.1\r\nHost: x\r\nOrigin: https://play.example.com\r\nAccess-Control-Request-Method: POST\r\nTransfer-Encoding: chunked\r\n\r\n",
		"PUT to a method": "PUT /palace.game.v1.GameService/GetGame HTTP/1.1\r\nHost: x\r\nConnect-Protocol-Version: 1\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n",
	}
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(requests))
	for name, r := range requests {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, r); err != nil {
			t.Fatal(err)
		}
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err == nil {
				resp.Body.Close()
			}
			results <- result{name, err}
		}()
	}
	var held []string
	for range requests {
		r := <-results
		var ne net.Error
		if errors.As(r.err, &ne) && ne.Timeout() {
			held = append(held, r.name)
		}
	}
	if len(held) == 0 {
		return
	}
	begun := time.Now()
	_ = stop()
	t.Fatalf("%d of %d requests (%v) neither answered nor closed 3 s after their headers (body timeout 500 ms); "+
		"the server's stop then took %v (shutdown timeout 4 s)", len(held), len(requests), held, time.Since(begun).Round(100*time.Millisecond))
}
