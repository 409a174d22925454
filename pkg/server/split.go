package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2/hpack"
)

// One port serves two kinds of client. Native gRPC clients (service
// backends, mobile apps, the load tools) open HTTP/2 connections without
// TLS and send nothing but gRPC; they are handed to grpc-go's own
// transport, which is several times cheaper per call than grpc-go behind
// net/http. Everything else (HTTP/1.1, Connect, gRPC-Web, /metrics, and
// HTTP/2 connections whose first request is not gRPC) goes to net/http.
// The split is made once per connection, from its first request's
// content-type. A connection that starts with another protocol and sends
// gRPC later is still served, because the net/http side routes gRPC
// requests to grpc-go as well; one that starts with gRPC is served gRPC
// alone. A proxy whose pooled upstream connections carry both kinds of
// client needs the split off (Config.SharedConnections).

const (
	http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

	frameData         = 0x0
	frameHeaders      = 0x1
	frameSettings     = 0x4
	frameContinuation = 0x9

	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20

	// sniffLimit bounds what is read before deciding; real clients send
	// their first HEADERS within a few hundred bytes.
	sniffLimit = 64 << 10
)

// settingsWait is how long a new HTTP/2 connection may stay silent before
// the splitter sends the server's SETTINGS itself: native gRPC clients
// (grpc-go, grpc-java) wait for them before their first request, so any
// wait here would hold back the first call of every connection, which a
// client opens anew at each MaxConnectionAge. The client's acknowledgement
// of them, when it comes after its first request, is dropped on the way
// to the server (dropSettingsAck).
const settingsWait = 0

// connListener is a net.Listener fed with connections by the splitter.
type connListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newConnListener(addr net.Addr) *connListener {
	return &connListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return l.addr }

func (l *connListener) deliver(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		_ = c.Close()
	}
}

// splitter accepts connections and hands each to the gRPC or HTTP side.
type splitter struct {
	lis       net.Listener
	grpc      *connListener
	http      *connListener
	log       *slog.Logger
	sniffTime time.Duration
	// userTimeout bounds how long data sent on a connection may stay
	// unacknowledged (setUserTimeout); 0 leaves the kernel's default.
	userTimeout time.Duration
	// shared hands every connection to the HTTP side (Config.SharedConnections).
	shared bool
	// tls, when set, is what every connection must speak first.
	tls *tls.Config
}

// serve accepts until lis is closed.
func (s *splitter) serve(ctx context.Context) error {
	var delay time.Duration
	for {
		c, err := s.lis.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Out of file descriptors and the like: back off as net/http does.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		go s.route(ctx, c)
	}
}

// route reads the start of c and delivers it, with what was read put back.
func (s *splitter) route(ctx context.Context, c net.Conn) {
	if s.userTimeout > 0 {
		if err := setUserTimeout(c, s.userTimeout); err != nil {
			s.log.DebugContext(ctx, "TCP user timeout", "remote", c.RemoteAddr().String(), "err", err)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(s.sniffTime))
	if s.tls != nil {
		tc, ok := s.startTLS(c)
		if !ok {
			return
		}
		c = tc
	}
	if s.shared {
		// Wrapped, so that net/http takes a TLS connection for the
		// plaintext it reads, as when the split is on.
		_ = c.SetReadDeadline(time.Time{})
		s.http.deliver(&replayConn{Conn: c})
		return
	}
	toGRPC, read, ackOwed, err := sniff(c, settingsWait)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			s.log.DebugContext(ctx, "connection dropped before its first request", "remote", c.RemoteAddr().String(), "err", err)
		}
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if ackOwed {
		c = &dropSettingsAck{Conn: c}
	}
	rc := &replayConn{Conn: c, buf: read}
	if toGRPC {
		s.grpc.deliver(rc)
		return
	}
	s.http.deliver(rc)
}

// plaintextToTLS answers a client that speaks plaintext to a TLS port,
// as net/http's own TLS server does, so that curl or a browser shows the
// mistake instead of an empty reply.
const plaintextToTLS = "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n" +
	"This port serves TLS: call it with https://, or with TLS credentials over gRPC.\n"

// startTLS starts TLS on c, whose first byte must open a TLS handshake
// (a record of type 22); it answers and closes any other.
func (s *splitter) startTLS(c net.Conn) (net.Conn, bool) {
	first := make([]byte, 1)
	if _, err := io.ReadFull(c, first); err != nil {
		_ = c.Close()
		return nil, false
	}
	if first[0] != 0x16 {
		_, _ = io.WriteString(c, plaintextToTLS)
		_ = c.Close()
		return nil, false
	}
	return tls.Server(&replayConn{Conn: c, buf: first}, s.tls), true
}

// sniff reads from c until it knows whether c is an HTTP/2 connection
// whose first request is gRPC. It returns the bytes to replay to the
// server that gets c. If c stays silent for wait after the HTTP/2
// preface, sniff sends an empty SETTINGS frame, and drops the client's
// acknowledgement of it from the replay so that the real server never sees
// an acknowledgement of settings it did not send; ackOwed tells that the
// acknowledgement is yet to come, after what was read, which ends with a
// whole frame.
func sniff(c net.Conn, wait time.Duration) (toGRPC bool, read []byte, ackOwed bool, err error) {
	got, err := readPreface(c)
	if err != nil || string(got) != http2Preface {
		return false, got, false, err
	}
	var (
		mu         sync.Mutex
		sent, done bool
	)
	timer := time.AfterFunc(wait, func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		if _, err := c.Write([]byte{0, 0, 0, frameSettings, 0, 0, 0, 0, 0}); err == nil {
			sent = true
		}
	})
	acked, whole := false, true
	// Once sniff returns, the real server owns the connection's writes.
	defer func() {
		timer.Stop()
		mu.Lock()
		done = true
		ackOwed = sent && !acked && whole && err == nil
		mu.Unlock()
	}()
	var block []byte
	for len(got) < sniffLimit {
		var hdr [9]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return false, nil, false, err
		}
		length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		typ, flags := hdr[3], hdr[4]
		if length > sniffLimit {
			// Not a sane first frame: let net/http answer it.
			whole = false
			return false, append(got, hdr[:]...), false, nil
		}
		payload := make([]byte, length)
		if _, err := io.ReadFull(c, payload); err != nil {
			return false, nil, false, err
		}
		mu.Lock()
		ours := sent && !acked && typ == frameSettings && flags&flagAck != 0
		mu.Unlock()
		if ours {
			acked = true
			continue
		}
		got = append(append(got, hdr[:]...), payload...)
		switch typ {
		case frameHeaders:
			frag, ok := headerFragment(payload, flags)
			if !ok {
				return false, got, false, nil
			}
			block = append(block, frag...)
		case frameContinuation:
			block = append(block, payload...)
		case frameData:
			return false, got, false, nil
		default:
			continue
		}
		if flags&flagEndHeaders != 0 {
			return isGRPC(block), got, false, nil
		}
	}
	return false, got, false, nil
}

// readPreface reads the HTTP/2 client preface, or as much of the
// connection's start as shows that it is not one.
func readPreface(c net.Conn) ([]byte, error) {
	got := make([]byte, 0, len(http2Preface))
	buf := make([]byte, len(http2Preface))
	for len(got) < len(http2Preface) {
		n, err := c.Read(buf[:len(http2Preface)-len(got)])
		got = append(got, buf[:n]...)
		if !strings.HasPrefix(http2Preface, string(got)) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

// headerFragment strips a HEADERS frame's padding and priority fields.
func headerFragment(p []byte, flags byte) ([]byte, bool) {
	pad := 0
	if flags&flagPadded != 0 {
		if len(p) < 1 {
			return nil, false
		}
		pad = int(p[0])
		p = p[1:]
	}
	if flags&flagPriority != 0 {
		if len(p) < 5 {
			return nil, false
		}
		p = p[5:]
	}
	if pad > len(p) {
		return nil, false
	}
	return p[:len(p)-pad], true
}

// isGRPC reports whether a request's header block says gRPC (and not
// gRPC-Web, which net/http's side serves).
func isGRPC(block []byte) bool {
	fields, err := hpack.NewDecoder(4096, nil).DecodeFull(block)
	if err != nil {
		return false
	}
	for _, f := range fields {
		if f.Name == "content-type" {
			return f.Value == "application/grpc" || strings.HasPrefix(f.Value, "application/grpc+") || strings.HasPrefix(f.Value, "application/grpc;")
		}
	}
	return false
}

// replayConn is a connection whose first bytes were already read.
type replayConn struct {
	net.Conn
	buf []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.buf) > 0 {
		n := copy(p, c.buf)
		c.buf = c.buf[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// dropSettingsAck reads an HTTP/2 connection from a frame's start and
// drops the first SETTINGS acknowledgement its client sends: that of the
// SETTINGS the splitter sent, which a client that sent its first request
// without waiting for them acknowledges after it. net/http would take it
// for an acknowledgement of its own, one too many, and end the connection.
type dropSettingsAck struct {
	net.Conn
	// hdr holds the start of a frame header not yet whole, pending what
	// was read and not yet returned.
	hdr, pending []byte
	// rest is what is left of the current frame's payload.
	rest    int
	dropped bool
	err     error
}

func (c *dropSettingsAck) Read(p []byte) (int, error) {
	for {
		switch {
		case len(c.pending) > 0:
			n := copy(p, c.pending)
			c.pending = c.pending[n:]
			return n, nil
		case c.err != nil:
			return 0, c.err
		case c.dropped:
			return c.Conn.Read(p)
		case c.rest > 0:
			n, err := c.Conn.Read(p[:min(len(p), c.rest)])
			c.rest -= n
			return n, err
		}
		var buf [9]byte
		n, err := c.Conn.Read(buf[:9-len(c.hdr)])
		c.hdr = append(c.hdr, buf[:n]...)
		c.err = err
		if len(c.hdr) < 9 {
			continue
		}
		h := c.hdr
		c.hdr = nil
		length := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		if h[3] == frameSettings && h[4]&flagAck != 0 && length == 0 {
			c.dropped = true
			continue
		}
		c.pending, c.rest = h, length
	}
}
