package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/telemetry"
)

// frame builds one HTTP/2 frame.
func frame(typ, flags byte, stream uint32, payload []byte) []byte {
	n := len(payload)
	b := []byte{byte(n >> 16), byte(n >> 8), byte(n), typ, flags, byte(stream >> 24), byte(stream >> 16), byte(stream >> 8), byte(stream)}
	return append(b, payload...)
}

func headerBlock(t *testing.T, fields ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for i := 0; i < len(fields); i += 2 {
		if err := enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]}); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// sniffPipe runs sniff on one end of a pipe while the client writes.
func sniffPipe(t *testing.T, client func(c net.Conn)) (bool, []byte, error) {
	t.Helper()
	srv, cli := net.Pipe()
	defer srv.Close()
	defer cli.Close()
	go client(cli)
	_ = srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	toGRPC, read, _, err := sniff(srv, 50*time.Millisecond)
	return toGRPC, read, err
}

func TestSniffRoutesByFirstRequest(t *testing.T) {
	h2 := func(ct string) []byte {
		b := []byte(http2Preface)
		b = append(b, frame(frameSettings, 0, 0, nil)...)
		b = append(b, frame(0x8, 0, 0, []byte{0, 0, 0, 1})...) // WINDOW_UPDATE
		return append(b, frame(frameHeaders, flagEndHeaders, 1, headerBlock(t, ":method", "POST", ":path", "/x.v1.S/M", "content-type", ct))...)
	}
	cases := []struct {
		name string
		in   []byte
		grpc bool
	}{
		{"http1", []byte("POST /x.v1.S/M HTTP/1.1\r\nHost: a\r\nContent-Type: application/grpc\r\n\r\n"), false},
		{"http1.0 shorter than the preface", []byte("GET / HTTP/1.0\r\n\r\n"), false},
		{"grpc", h2("application/grpc"), true},
		{"grpc+proto", h2("application/grpc+proto"), true},
		{"grpc-web", h2("application/grpc-web+proto"), false},
		{"connect", h2("application/json"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			toGRPC, read, err := sniffPipe(t, func(cl net.Conn) { _, _ = cl.Write(c.in) })
			if err != nil {
				t.Fatal(err)
			}
			if toGRPC != c.grpc {
				t.Fatalf("to gRPC %v, want %v", toGRPC, c.grpc)
			}
			// What was read is replayed: a start of the input (all of it
			// up to the first request's headers for HTTP/2).
			if len(read) == 0 || !bytes.HasPrefix(c.in, read) || (bytes.HasPrefix(c.in, []byte(http2Preface)) && !bytes.Equal(read, c.in)) {
				t.Fatalf("replay %q of %q", read, c.in)
			}
		})
	}
}

func TestSniffHeadersInContinuation(t *testing.T) {
	block := headerBlock(t, ":method", "POST", ":path", "/x.v1.S/M", "content-type", "application/grpc")
	in := []byte(http2Preface)
	in = append(in, frame(frameHeaders, flagPadded, 1, append(append([]byte{2}, block[:3]...), 0, 0))...)
	in = append(in, frame(frameContinuation, flagEndHeaders, 1, block[3:])...)
	toGRPC, read, err := sniffPipe(t, func(c net.Conn) { _, _ = c.Write(in) })
	if err != nil || !toGRPC || !bytes.Equal(read, in) {
		t.Fatalf("to gRPC %v, err %v, replay equal %v", toGRPC, err, bytes.Equal(read, in))
	}
}

// A client that waits for the server's SETTINGS gets them from the
// splitter, and its acknowledgement is not replayed to the real server.
func TestSniffSendsSettingsToAWaitingClient(t *testing.T) {
	start := append([]byte(http2Preface), frame(frameSettings, 0, 0, nil)...)
	headers := frame(frameHeaders, flagEndHeaders, 1, headerBlock(t, "content-type", "application/grpc"))
	toGRPC, read, err := sniffPipe(t, func(c net.Conn) {
		_, _ = c.Write(start)
		got := make([]byte, 9)
		if _, err := io.ReadFull(c, got); err != nil || got[3] != frameSettings || got[4] != 0 {
			t.Errorf("server settings %x, %v", got, err)
			return
		}
		_, _ = c.Write(frame(frameSettings, flagAck, 0, nil))
		_, _ = c.Write(headers)
	})
	if err != nil || !toGRPC {
		t.Fatalf("to gRPC %v, err %v", toGRPC, err)
	}
	if want := append(append([]byte(nil), start...), headers...); !bytes.Equal(read, want) {
		t.Fatalf("replay %x, want %x", read, want)
	}
}

func TestSniffGivesUpOnSilence(t *testing.T) {
	srv, cli := net.Pipe()
	defer srv.Close()
	defer cli.Close()
	go func() { _, _ = cli.Write([]byte("PRI * HT")) }()
	_ = srv.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, _, _, err := sniff(srv, time.Hour); err == nil {
		t.Fatal("a silent connection was routed")
	}
}

func FuzzSniff(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add(append([]byte(http2Preface), frame(frameHeaders, flagEndHeaders|flagPadded|flagPriority, 1, []byte{9, 1, 2})...))
	f.Add(append([]byte(http2Preface), frame(frameContinuation, 0, 1, []byte{0x82})...))
	f.Fuzz(func(t *testing.T, in []byte) {
		srv, cli := net.Pipe()
		defer srv.Close()
		go func() { _, _ = cli.Write(in); _ = cli.Close() }()
		_ = srv.SetReadDeadline(time.Now().Add(time.Second))
		toGRPC, read, _, err := sniff(srv, time.Hour)
		// Either server is handed what was read, in order, to read on.
		if err == nil && !bytes.HasPrefix(in, read) {
			t.Fatalf("replay %q (to gRPC: %v) is not the start of %q", read, toGRPC, in)
		}
		if toGRPC && !bytes.HasPrefix(in, []byte(http2Preface)) {
			t.Fatalf("%q routed to gRPC without the HTTP/2 preface", in)
		}
	})
}

// startServer serves health on a free port until the test ends.
func startServer(t *testing.T) (addr string, stop func() error) {
	t.Helper()
	return startServerWith(t, Config{})
}

// startServerWith is startServer with cfg, whose address it sets, and its
// shutdown timeout when cfg has none.
func startServerWith(t *testing.T, cfg Config, register ...func(*Server)) (addr string, stop func() error) {
	t.Helper()
	return startServerLogging(t, cfg, slog.New(slog.DiscardHandler), register...)
}

// startServerLogging is startServerWith, the server logging to log.
func startServerLogging(t *testing.T, cfg Config, log *slog.Logger, register ...func(*Server)) (addr string, stop func() error) {
	t.Helper()
	tel, err := telemetry.New(context.Background(), telemetry.Config{ServiceName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 5 * time.Second
	}
	s := New(cfg, log, tel)
	for _, r := range register {
		r(s)
	}
	lis, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, lis) }()
	var once bool
	stop = func() error {
		if once {
			return nil
		}
		once = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("server did not stop")
			return nil
		}
	}
	t.Cleanup(func() { _ = stop() })
	return lis.Addr().String(), stop
}

// Every client kind is served on the one port: native gRPC, Connect over
// HTTP/1.1 and over HTTP/2 without TLS, and plain HTTP.
func TestOnePortServesEveryClient(t *testing.T) {
	addr, _ := startServer(t)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	r, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC health: %v %v", r, err)
	}
	for _, p := range []struct {
		name  string
		proto func(*http.Protocols)
	}{
		{"http1", func(p *http.Protocols) { p.SetHTTP1(true) }},
		{"h2c", func(p *http.Protocols) { p.SetUnencryptedHTTP2(true) }},
	} {
		var protos http.Protocols
		p.proto(&protos)
		hc := &http.Client{Transport: &http.Transport{Protocols: &protos}, Timeout: 5 * time.Second}
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/grpc.health.v1.Health/Check", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Connect-Protocol-Version", "1")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "SERVING") {
			t.Fatalf("%s Connect health: %d %s", p.name, resp.StatusCode, body)
		}
		resp, err = hc.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatalf("%s metrics: %v", p.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s metrics: %d", p.name, resp.StatusCode)
		}
	}
}

// waitingEvents answers a stream once, then waits for its context to end
// and returns nil, as a handler that sees no error in a stream ending may.
type waitingEvents struct {
	gamev1.UnimplementedGameServiceServer
}

func (waitingEvents) StreamEvents(_ *gamev1.StreamEventsRequest, ss gamev1.GameService_StreamEventsServer) error {
	if err := ss.Send(&gamev1.StreamEventsResponse{}); err != nil {
		return err
	}
	<-ss.Context().Done()
	return nil
}

// A stream that a stop ends must end with Unavailable even when its
// handler returns nil: OK would tell the client that the stream is
// complete (a game over), and it would not resume elsewhere.
func TestStopNeverEndsAStreamWithOK(t *testing.T) {
	addr, stop := startServerWith(t, Config{}, func(s *Server) { s.RegisterService(&gamev1.GameService_ServiceDesc, waitingEvents{}) })
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	st, err := gamev1.NewGameServiceClient(cc).StreamEvents(context.Background(), &gamev1.StreamEventsRequest{GameId: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream ended with %v, want Unavailable", err)
	}
}

// A graceful stop ends open streams at once, with Unavailable so that
// clients reconnect elsewhere, instead of waiting out the timeout.
func TestStopEndsOpenStreams(t *testing.T) {
	addr, stop := startServer(t)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	w, err := healthpb.NewHealthClient(cc).Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("stop took %v with a stream open", took)
	}
	for {
		if _, err := w.Recv(); err != nil {
			if c := status.Code(err); c != codes.Unavailable {
				t.Fatalf("stream ended with %v", err)
			}
			return
		}
	}
}

// One cleartext HTTP/2 connection carrying native gRPC first and Connect
// after, as a proxy pooling its upstream connections sends them: with
// SharedConnections both are served; with the split, the Connect call is
// refused, which is why the option exists.
func TestSharedConnectionsServeMixedCalls(t *testing.T) {
	for _, shared := range []bool{true, false} {
		addr, _ := startServerWith(t, Config{SharedConnections: shared})
		// One client connection for both calls, by construction: net/http's
		// pool may dial a second one when the first is busy for a moment
		// (a stream still being cleaned up), which would prove nothing.
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := (&http2.Transport{AllowHTTP: true}).NewClientConn(conn)
		if err != nil {
			t.Fatal(err)
		}
		frame := binary.BigEndian.AppendUint32([]byte{0}, 0) // an empty HealthCheckRequest
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/grpc.health.v1.Health/Check", bytes.NewReader(frame))
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Te", "trailers")
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Trailer.Get("Grpc-Status") != "0" {
			t.Fatalf("shared %v: native gRPC: %d, grpc-status %q", shared, resp.StatusCode, resp.Trailer.Get("Grpc-Status"))
		}
		req, _ = http.NewRequest(http.MethodPost, "http://"+addr+"/grpc.health.v1.Health/Check", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Connect-Protocol-Version", "1")
		served := false
		var answer string
		if resp, err := cc.RoundTrip(req); err != nil {
			answer = err.Error()
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			served = resp.StatusCode == http.StatusOK && strings.Contains(string(body), "SERVING")
			answer = fmt.Sprintf("%d %q", resp.StatusCode, body)
		}
		if served != shared {
			t.Fatalf("shared %v: Connect after native gRPC on one connection: %s", shared, answer)
		}
		_ = cc.Close()
	}
}

// A client that sends its first request without waiting for the server's
// SETTINGS (a browser, Go's HTTP/2 client) acknowledges the splitter's
// after it: net/http, which never sent those, must not see that
// acknowledgement, or it ends the connection as one acknowledgement too
// many.
func TestAnAcknowledgementAfterTheFirstRequestReachesNoServer(t *testing.T) {
	addr, _ := startServer(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(append([]byte(http2Preface), frame(frameSettings, 0, 0, nil)...)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	// The server's first SETTINGS come; the request goes before their
	// acknowledgement.
	if f, err := fr.ReadFrame(); err != nil {
		t.Fatal(err)
	} else if s, ok := f.(*http2.SettingsFrame); !ok || s.IsAck() {
		t.Fatalf("first frame %v, want SETTINGS", f)
	}
	get := frame(frameHeaders, flagEndHeaders|0x1, 1, headerBlock(t, ":method", "GET", ":scheme", "http", ":authority", addr, ":path", "/metrics"))
	if _, err := c.Write(append(get, frame(frameSettings, flagAck, 0, nil)...)); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.GoAwayFrame:
			t.Fatalf("the server went away: %v %q", f.ErrCode, f.DebugData())
		case *http2.MetaHeadersFrame:
			if s := f.PseudoValue("status"); s != "200" {
				t.Fatalf("status %s", s)
			}
			// The connection still serves after the acknowledgements.
			if err := fr.WritePing(false, [8]byte{1}); err != nil {
				t.Fatal(err)
			}
		case *http2.PingFrame:
			if f.IsAck() && f.Data == [8]byte{1} {
				return
			}
		}
	}
}

// chunkConn reads its input n bytes at a time, then ends with err.
type chunkConn struct {
	net.Conn
	in  []byte
	n   int
	err error
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, c.err
	}
	k := copy(p[:min(len(p), c.n)], c.in)
	c.in = c.in[k:]
	return k, nil
}

// Only the first SETTINGS acknowledgement is dropped, however the
// connection's reads cut the frames, and whatever the frames before it.
func TestDropSettingsAckDropsTheFirstOnly(t *testing.T) {
	settings := frame(frameSettings, 0, 0, []byte{0, 3, 0, 0, 0, 100})
	// SETTINGS with none changed: not an acknowledgement.
	empty := frame(frameSettings, 0, 0, nil)
	ack := frame(frameSettings, flagAck, 0, nil)
	// A DATA frame whose payload looks like an acknowledgement.
	data := frame(frameData, 0, 1, ack)
	in := slices.Concat(settings, empty, data, ack, ack)
	want := slices.Concat(settings, empty, data, ack)
	for n := 1; n <= len(in); n++ {
		got, err := io.ReadAll(&dropSettingsAck{Conn: &chunkConn{in: in, n: n, err: io.EOF}})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("read %d bytes at a time: %x, want %x", n, got, want)
		}
	}
}

// A connection that ends within a frame's header ends the reads with its
// error.
func TestDropSettingsAckEndsWithItsConnection(t *testing.T) {
	ended := errors.New("connection reset")
	in := append(frame(frameSettings, 0, 0, nil), frame(frameData, 0, 1, nil)[:4]...)
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(&dropSettingsAck{Conn: &chunkConn{in: in, n: 2, err: ended}})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ended) {
			t.Fatalf("reads ended with %v, want the connection's error", err)
		}
	case <-time.After(time.Second):
		t.Fatal("reads still going a second after the connection ended")
	}
}

// A connection whose first 24 bytes are not the HTTP/2 preface (an
// HTTP/1.1 request with a long path, a mangled preface) is handed over at
// once, as it came, and nothing is written to it: a SETTINGS frame ahead
// of an HTTP/1.1 answer would garble it.
func TestSniffTakesNothingButThePrefaceForHTTP2(t *testing.T) {
	for _, start := range []string{"GET /0123456789abcdefghi", http2Preface[:len(http2Preface)-1] + "!"} {
		srv, cli := net.Pipe()
		wrote := make(chan []byte, 1)
		go func() {
			_, _ = cli.Write([]byte(start))
			b, _ := io.ReadAll(cli)
			wrote <- b
		}()
		_ = srv.SetReadDeadline(time.Now().Add(time.Second))
		toGRPC, read, _, err := sniff(srv, 0)
		_ = srv.Close()
		if err != nil || toGRPC || string(read) != start {
			t.Fatalf("%q: to gRPC %v, read %q, %v; want it handed to net/http as it came", start, toGRPC, read, err)
		}
		if b := <-wrote; len(b) > 0 {
			t.Fatalf("%q: the splitter wrote %x to a client that opened no HTTP/2 connection", start, b)
		}
	}
}
