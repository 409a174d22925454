package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/logging"
)

// countingDialer dials TCP and counts the connections it made.
type countingDialer struct{ n atomic.Int64 }

func (d *countingDialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	d.n.Add(1)
	return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
}

// A client calling steadily is moved to a new connection each time its
// connection reaches its age, in every protocol, and none of its calls
// fails for it; without an age, one connection serves every call.
func TestConnectionsAreRenewedAtTheirAge(t *testing.T) {
	const age = 200 * time.Millisecond
	clients := []struct {
		name   string
		shared bool
		client func(t *testing.T, addr string, d *countingDialer) func(context.Context) error
	}{
		{name: "grpc", client: grpcHealthCheck},
		{name: "grpc shared", shared: true, client: grpcHealthCheck},
		{name: "connect http1", client: connectHealthCheck(func(p *http.Protocols) { p.SetHTTP1(true) })},
		{name: "connect h2c", client: connectHealthCheck(func(p *http.Protocols) { p.SetUnencryptedHTTP2(true) })},
	}
	for _, c := range clients {
		for _, maxAge := range []time.Duration{0, age} {
			t.Run(fmt.Sprintf("%s/age=%v", c.name, maxAge), func(t *testing.T) {
				addr, _ := startServerWith(t, Config{MaxConnectionAge: maxAge, MaxConnectionAgeGrace: time.Second, SharedConnections: c.shared})
				var d countingDialer
				call := c.client(t, addr, &d)
				calls := 0
				for end := time.Now().Add(6 * age); time.Now().Before(end); calls++ {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					err := call(ctx)
					cancel()
					if err != nil {
						t.Fatalf("call %d: %v", calls+1, err)
					}
					time.Sleep(10 * time.Millisecond)
				}
				conns := d.n.Load()
				switch {
				case maxAge == 0 && conns != 1:
					t.Fatalf("%d calls over %d connections, want one connection without an age", calls, conns)
				case maxAge > 0 && conns < 3:
					t.Fatalf("%d calls over %v on %d connections, want a new one each %v", calls, 6*age, conns, maxAge)
				case maxAge > 0 && conns > 2*6:
					// A connection serves every call of its age, not one.
					t.Fatalf("%d calls over %v on %d connections, want one for each %v", calls, 6*age, conns, maxAge)
				}
			})
		}
	}
}

func grpcHealthCheck(t *testing.T, addr string, d *countingDialer) func(context.Context) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(d.dial))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	h := healthpb.NewHealthClient(cc)
	return func(ctx context.Context) error {
		_, err := h.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
}

func connectHealthCheck(proto func(*http.Protocols)) func(t *testing.T, addr string, d *countingDialer) func(context.Context) error {
	return func(t *testing.T, addr string, d *countingDialer) func(context.Context) error {
		var protos http.Protocols
		proto(&protos)
		tr := &http.Transport{Protocols: &protos, DialContext: func(ctx context.Context, _, a string) (net.Conn, error) { return d.dial(ctx, a) }}
		t.Cleanup(tr.CloseIdleConnections)
		hc := &http.Client{Transport: tr}
		return func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/grpc.health.v1.Health/Check", strings.NewReader("{}"))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Connect-Protocol-Version", "1")
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "SERVING") {
				return fmt.Errorf("health check: %d %s", resp.StatusCode, body)
			}
			return nil
		}
	}
}

// A negative connection age or grace is refused, and a grace left unset
// is the default: grpc-go takes a grace of 0 for no end, so a stream
// whose client reads nothing would keep its connection past its age.
func TestConnectionAgesAreChecked(t *testing.T) {
	for _, c := range []Config{{MaxConnectionAge: -time.Minute}, {MaxConnectionAgeGrace: -time.Second}} {
		c.Listen = "127.0.0.1:0"
		if err := c.Validate(); err == nil {
			t.Errorf("age %v, grace %v: valid", c.MaxConnectionAge, c.MaxConnectionAgeGrace)
		}
	}
	if g := (Config{MaxConnectionAge: time.Minute}).withDefaults().MaxConnectionAgeGrace; g != DefaultMaxConnectionAgeGrace {
		t.Fatalf("grace left unset: %v, want %v", g, DefaultMaxConnectionAgeGrace)
	}
}

// A native gRPC stream still open when its connection reaches its age
// gets the grace, then ends UNAVAILABLE, and its client's next stream is
// served on a new connection.
func TestAStreamOutlivingItsConnectionEndsAfterTheGrace(t *testing.T) {
	const age, grace = 200 * time.Millisecond, 500 * time.Millisecond
	ev := endingEvents{once: new(sync.Once), ended: make(chan struct{})}
	addr, _ := startServerWith(t, Config{MaxConnectionAge: age, MaxConnectionAgeGrace: grace},
		func(s *Server) { s.RegisterService(&gamev1.GameService_ServiceDesc, ev) })
	var d countingDialer
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(d.dial))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	games := gamev1.NewGameServiceClient(cc)
	st, err := games.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: "g"})
	if err != nil {
		t.Fatal(err)
	}
	opened := time.Now()
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	_, err = st.Recv()
	took := time.Since(opened)
	if status.Code(err) != codes.Unavailable || !Renewed(err) {
		t.Fatalf("the stream ended with %v, want UNAVAILABLE, told a renewal, once its connection is closed", err)
	}
	// grpc-go varies the age by up to 10% either way.
	if least := age*9/10 + grace; took < least {
		t.Fatalf("the stream ended %v after it opened, before its connection's age and grace (%v)", took, least)
	}
	st, err = games.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: "g"})
	if err == nil {
		_, err = st.Recv()
	}
	if err != nil {
		t.Fatalf("a stream opened after the connection closed: %v", err)
	}
	if n := d.n.Load(); n != 2 {
		t.Fatalf("%d connections, want the second stream on a second one", n)
	}
}

// floodEvents sends to its stream until a send fails, counting what it
// sent, and reports when it returns.
type floodEvents struct {
	gamev1.UnimplementedGameServiceServer
	sent  *atomic.Int64
	ended chan struct{}
}

func (f floodEvents) StreamEvents(_ *gamev1.StreamEventsRequest, ss gamev1.GameService_StreamEventsServer) error {
	defer close(f.ended)
	msg := &gamev1.StreamEventsResponse{Message: &gamev1.StreamEventsResponse_Snapshot{Snapshot: &gamev1.Game{GameId: strings.Repeat("g", 1000)}}}
	for {
		if err := ss.Send(msg); err != nil {
			return err
		}
		f.sent.Add(1)
	}
}

// A stream whose client reads nothing (a flow control window of 0) holds
// what grpc-go queued for it while its connection lives, its handler stuck
// in a send: the connection's age ends both, once the grace is over,
// though the client answers every ping.
func TestAnUnreadStreamEndsWithItsConnectionsAge(t *testing.T) {
	for _, maxAge := range []time.Duration{0, 200 * time.Millisecond} {
		t.Run(fmt.Sprintf("age=%v", maxAge), func(t *testing.T) {
			const grace = 300 * time.Millisecond
			fl := floodEvents{sent: new(atomic.Int64), ended: make(chan struct{})}
			addr, _ := startServerWith(t, Config{MaxConnectionAge: maxAge, MaxConnectionAgeGrace: grace},
				func(s *Server) { s.RegisterService(&gamev1.GameService_ServiceDesc, fl) })
			closed := make(chan struct{})
			c := dialUnreading(t, addr, "/palace.game.v1.GameService/StreamEvents", func(http2.Frame) {}, func() { close(closed) })
			if err := c.call(1); err != nil {
				t.Fatal(err)
			}
			select {
			case <-fl.ended:
				if maxAge == 0 {
					t.Fatalf("the stream ended after %d sends, though its connection has no age and its client lives", fl.sent.Load())
				}
			case <-time.After(3 * time.Second):
				if maxAge > 0 {
					t.Fatalf("the stream's handler is still sending (%d sent) 3 s into a connection of age %v", fl.sent.Load(), maxAge)
				}
				if n := fl.sent.Load(); n < 10 {
					t.Fatalf("the handler sent %d messages, want it stuck after filling grpc-go's queue", n)
				}
				return
			}
			select {
			case <-closed:
			case <-time.After(3 * time.Second):
				t.Fatal("the connection is still open after its stream ended")
			}
		})
	}
}

// Only the close of a connection sent away at its age reads as a renewal:
// not a server that stopped, nor a refusal that names the words.
func TestOnlyARenewalReadsAsOne(t *testing.T) {
	for _, err := range []error{
		nil,
		status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused\""),
		status.Error(codes.Unavailable, "closing transport due to: connection error: desc = \"error reading from server: EOF\", received prior goaway: code: NO_ERROR, debug data: \"graceful_stop\""),
		status.Error(codes.Internal, `received prior goaway: code: NO_ERROR, debug data: "max_age"`),
	} {
		if Renewed(err) {
			t.Errorf("Renewed(%v) = true", err)
		}
	}
}

// A native gRPC client (grpc-go, grpc-java) waits for the server's
// SETTINGS before its first call on a new connection, and a client whose
// connection is renewed opens one each MaxConnectionAge: its next call
// must not wait for the splitter's sniffing, nor a clock's flag with it.
func TestANewConnectionsFirstCallIsNotHeldBack(t *testing.T) {
	addr, _ := startServer(t)
	fastest := time.Hour
	for range 3 {
		var d countingDialer
		call := grpcHealthCheck(t, addr, &d)
		began := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := call(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		fastest = min(fastest, time.Since(began))
	}
	if fastest > 100*time.Millisecond {
		t.Fatalf("the first call on a new connection took %v at best: held back until the splitter sent SETTINGS", fastest)
	}
}

// unavailableAtEnd answers a stream once, then ends it UNAVAILABLE: at
// once for the game "now", else when its context ends, as an event stream
// whose connection goes does.
type unavailableAtEnd struct {
	gamev1.UnimplementedGameServiceServer
}

func (unavailableAtEnd) StreamEvents(req *gamev1.StreamEventsRequest, ss gamev1.GameService_StreamEventsServer) error {
	if err := ss.Send(&gamev1.StreamEventsResponse{}); err != nil {
		return err
	}
	if req.GetGameId() != "now" {
		<-ss.Context().Done()
	}
	return status.Error(codes.Unavailable, "the stream cannot go on")
}

// A stream cut by its connection's renewal is routine, as a client
// hanging up is, and logs no warning: every long stream is cut so each
// MaxConnectionAge. A stream the server ends UNAVAILABLE while its client
// is there still warns.
func TestARenewalIsNoWarning(t *testing.T) {
	var logs logging.Buffer
	addr, _ := startServerLogging(t, Config{MaxConnectionAge: 200 * time.Millisecond, MaxConnectionAgeGrace: 200 * time.Millisecond},
		slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		func(s *Server) { s.RegisterService(&gamev1.GameService_ServiceDesc, unavailableAtEnd{}) })
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, game := range []string{"now", "renewed"} {
		st, err := gamev1.NewGameServiceClient(cc).StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: game})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); status.Code(err) != codes.Unavailable || Renewed(err) != (game == "renewed") {
			t.Fatalf("stream %s ended with %v", game, err)
		}
	}
	var lines []string
	for until := time.Now().Add(5 * time.Second); len(lines) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(until) {
			t.Fatalf("%d calls logged, want 2:\n%s", len(lines), logs.String())
		}
		lines = nil
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, "msg=rpc") && strings.Contains(line, "StreamEvents") {
				lines = append(lines, line)
			}
		}
	}
	if !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[1], "level=DEBUG") {
		t.Fatalf("want a warning for the stream the server ended, debug for the renewed one:\n%s", strings.Join(lines, ""))
	}
}
