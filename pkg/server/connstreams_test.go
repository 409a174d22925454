package server

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestOneConnectionCarriesAtMostItsShareOfCalls: a client that never takes
// an answer (a flow control window of 0) keeps each of its calls open; one
// connection carries at most maxStreamsPerConn of them, on grpc-go's own
// transport as on shared connections, and the calls beyond are refused
// (RST_STREAM) rather than held.
func TestOneConnectionCarriesAtMostItsShareOfCalls(t *testing.T) {
	const extra = 20
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			addr, _ := startServerWith(t, Config{SharedConnections: shared})
			reset := make(chan uint32, 4*extra)
			// The server answers the calls it holds (their headers) one
			// after another before it comes to those beyond: under the race
			// detector on a busy machine that takes well over 10 s. The
			// test waits as long as answers keep coming.
			answered := make(chan struct{}, 1)
			c := dialUnreading(t, addr, "/grpc.health.v1.Health/Check", func(f http2.Frame) {
				switch f := f.(type) {
				case *http2.RSTStreamFrame:
					reset <- f.StreamID
				case *http2.HeadersFrame:
					select {
					case answered <- struct{}{}:
					default:
					}
				}
			}, func() { close(reset) })
			for i := range maxStreamsPerConn + extra {
				if err := c.call(uint32(2*i + 1)); err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
			}
			const quiet = 10 * time.Second
			silence := time.NewTimer(quiet)
			defer silence.Stop()
			var refused []uint32
			for len(refused) < extra {
				select {
				case id, ok := <-reset:
					if !ok {
						t.Fatalf("the connection ended after %d calls were refused, want %d refused and the rest held", len(refused), extra)
					}
					refused = append(refused, id)
				case <-answered:
					silence.Reset(quiet)
				case <-silence.C:
					t.Fatalf("%d of the %d calls past the first %d were refused, and the server answered nothing for %v", len(refused), extra, maxStreamsPerConn, quiet)
				}
			}
			for _, id := range refused {
				if n := int(id+1) / 2; n <= maxStreamsPerConn {
					t.Fatalf("call %d was refused, want only those past the first %d", n, maxStreamsPerConn)
				}
			}
		})
	}
}

// unreadingClient is a raw HTTP/2 client that answers the server's
// settings and pings, as a live client does, but takes none of the data
// sent to it (a flow control window of 0).
type unreadingClient struct {
	mu    sync.Mutex // the framer's writes
	fr    *http2.Framer
	block []byte // the headers of each call
}

// dialUnreading connects to addr for native gRPC calls of path. It hands
// every frame it reads to seen, and calls ended once the connection ends.
func dialUnreading(t *testing.T, addr, path string, seen func(http2.Frame), ended func()) *unreadingClient {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	c := &unreadingClient{fr: http2.NewFramer(conn, conn)}
	if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path},
		{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	c.block = block.Bytes()
	go func() {
		defer ended()
		for {
			f, err := c.fr.ReadFrame()
			if err != nil {
				return
			}
			c.mu.Lock()
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = c.fr.WriteSettingsAck()
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					_ = c.fr.WritePing(true, f.Data)
				}
			}
			seen(f)
			c.mu.Unlock()
		}
	}()
	return c
}

// call opens stream id with an empty request.
func (c *unreadingClient) call(id uint32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.block, EndHeaders: true}); err != nil {
		return err
	}
	return c.fr.WriteData(id, true, []byte{0, 0, 0, 0, 0})
}
