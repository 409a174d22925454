package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/logging"
)

// slowGame answers GetGame after a second unless its context ends first,
// as a command that commits a move before answering may take a while.
type slowGame struct {
	gamev1.UnimplementedGameServiceServer
	started chan struct{}
	// ctxErr gets what the handler's context said when it finished.
	ctxErr chan error
}

func (g slowGame) GetGame(ctx context.Context, req *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
	g.started <- struct{}{}
	select {
	case <-time.After(time.Second):
		g.ctxErr <- nil
	case <-ctx.Done():
		g.ctxErr <- ctx.Err()
		return nil, ctx.Err()
	}
	return &gamev1.GetGameResponse{Game: &gamev1.Game{GameId: req.GetGameId()}}, nil
}

// httpClients are Connect clients over HTTP/1.1 and over HTTP/2 without
// TLS, the two ways net/http hands calls to the server.
func httpClients() map[string]*http.Client {
	clients := map[string]*http.Client{}
	for name, set := range map[string]func(*http.Protocols){
		"http1": func(p *http.Protocols) { p.SetHTTP1(true) },
		"h2c":   func(p *http.Protocols) { p.SetUnencryptedHTTP2(true) },
	} {
		var p http.Protocols
		set(&p)
		clients[name] = &http.Client{Transport: &http.Transport{Protocols: &p}, Timeout: 10 * time.Second}
	}
	return clients
}

// A Connect call running when the server stops is answered, its handler's
// context intact: a command committed while the client is told nothing
// would be retried, or its result lost.
func TestStopLetsConnectCallsFinish(t *testing.T) {
	for name, hc := range httpClients() {
		t.Run(name, func(t *testing.T) {
			g := slowGame{started: make(chan struct{}, 1), ctxErr: make(chan error, 1)}
			addr, stop := startServerWith(t, Config{}, func(s *Server) { s.RegisterService(&gamev1.GameService_ServiceDesc, g) })
			type answer struct {
				code int
				body string
				err  error
			}
			answers := make(chan answer, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/GetGame", strings.NewReader(`{"gameId":"g"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Connect-Protocol-Version", "1")
				resp, err := hc.Do(req)
				if err != nil {
					answers <- answer{err: err}
					return
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				answers <- answer{code: resp.StatusCode, body: string(body), err: err}
			}()
			select {
			case <-g.started:
			case <-time.After(5 * time.Second):
				t.Fatal("the call did not reach its handler")
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if err := <-g.ctxErr; err != nil {
				t.Errorf("the handler's context ended during the stop: %v", err)
			}
			a := <-answers
			if a.err != nil || a.code != http.StatusOK || !strings.Contains(a.body, `"gameId":"g"`) {
				t.Fatalf("call in flight at the stop: %d %s %v; want 200 with the game", a.code, a.body, a.err)
			}
		})
	}
}

// connectEnd is the end-of-stream message of the Connect protocol.
type connectEnd struct {
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// connectStreamEnd reads a Connect stream's messages up to its end and
// returns the end; at least one message must come before it.
func connectStreamEnd(t *testing.T, r io.Reader, afterFirst func()) connectEnd {
	t.Helper()
	br := bufio.NewReader(r)
	for i := 0; ; i++ {
		head := make([]byte, 5)
		if _, err := io.ReadFull(br, head); err != nil {
			t.Fatalf("after %d messages: %v", i, err)
		}
		msg := make([]byte, binary.BigEndian.Uint32(head[1:]))
		if _, err := io.ReadFull(br, msg); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if head[0]&0x02 != 0 {
			if i == 0 {
				t.Fatalf("stream ended before its first message: %s", msg)
			}
			var end connectEnd
			if err := json.Unmarshal(msg, &end); err != nil {
				t.Fatalf("end of stream %q: %v", msg, err)
			}
			return end
		}
		if i == 0 {
			afterFirst()
		}
	}
}

// A Connect stream open when the server stops ends with unavailable, so
// that its client resumes on another replica, never with a protocol
// error. The race this guards against lost about one stream in ten.
func TestStopEndsConnectStreamsWithUnavailable(t *testing.T) {
	for name, hc := range httpClients() {
		t.Run(name, func(t *testing.T) {
			for range 20 {
				addr, stop := startServerWith(t, Config{}, func(s *Server) { s.RegisterService(&gamev1.GameService_ServiceDesc, waitingEvents{}) })
				body := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(`{"gameId":"g"}`))), `{"gameId":"g"}`...)
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/StreamEvents", strings.NewReader(string(body)))
				req.Header.Set("Content-Type", "application/connect+json")
				req.Header.Set("Connect-Protocol-Version", "1")
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("stream: HTTP %d", resp.StatusCode)
				}
				end := connectStreamEnd(t, resp.Body, func() {
					if err := stop(); err != nil {
						t.Fatal(err)
					}
				})
				resp.Body.Close()
				if end.Error == nil || end.Error.Code != "unavailable" {
					t.Fatalf("stream ended with %+v, want unavailable", end.Error)
				}
			}
		})
	}
}

// A Connect call still running when the shutdown timeout ends is cut off
// as a dropped connection, which every Connect client reads as
// unavailable and may retry (a command with its request_id), and a line
// says so; it was answered "unknown", a protocol error of the transcoder
// that no client retries, and nothing was logged.
func TestStopCutsOffConnectCallsPastTheTimeoutAsUnavailable(t *testing.T) {
	for name, hc := range httpClients() {
		t.Run(name, func(t *testing.T) {
			g := slowGame{started: make(chan struct{}, 1), ctxErr: make(chan error, 1)}
			var logs logging.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			addr, stop := startServerLogging(t, Config{ShutdownTimeout: 100 * time.Millisecond}, log,
				func(s *Server) { s.RegisterService(&gamev1.GameService_ServiceDesc, g) })
			type answer struct {
				code int
				body string
				err  error
			}
			answers := make(chan answer, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/GetGame", strings.NewReader(`{"gameId":"g"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Connect-Protocol-Version", "1")
				resp, err := hc.Do(req)
				if err != nil {
					answers <- answer{err: err}
					return
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				answers <- answer{code: resp.StatusCode, body: string(body), err: err}
			}()
			select {
			case <-g.started:
			case <-time.After(5 * time.Second):
				t.Fatal("the call did not reach its handler")
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			a := <-answers
			if a.err == nil && !strings.Contains(a.body, `"code":"unavailable"`) {
				t.Errorf("call cut off by the stop: HTTP %d %s; want a dropped connection or unavailable", a.code, a.body)
			}
			if !strings.Contains(logs.String(), "cut off") {
				t.Errorf("no line says calls were cut off; logged:\n%s", logs.String())
			}
		})
	}
}
