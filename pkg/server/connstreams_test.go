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
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
				t.Fatal(err)
			}
			fr := http2.NewFramer(c, c)
			var mu sync.Mutex // the framer's writes
			if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
				t.Fatal(err)
			}
			reset := make(chan uint32, 4*extra)
			go func() {
				for {
					f, err := fr.ReadFrame()
					if err != nil {
						close(reset)
						return
					}
					mu.Lock()
					switch f := f.(type) {
					case *http2.SettingsFrame:
						if !f.IsAck() {
							_ = fr.WriteSettingsAck()
						}
					case *http2.PingFrame:
						if !f.IsAck() {
							_ = fr.WritePing(true, f.Data)
						}
					case *http2.RSTStreamFrame:
						reset <- f.StreamID
					}
					mu.Unlock()
				}
			}()
			var block bytes.Buffer
			enc := hpack.NewEncoder(&block)
			for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/grpc.health.v1.Health/Check"},
				{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
				if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range maxStreamsPerConn + extra {
				id := uint32(2*i + 1)
				mu.Lock()
				err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true})
				if err == nil {
					err = fr.WriteData(id, true, []byte{0, 0, 0, 0, 0}) // an empty request
				}
				mu.Unlock()
				if err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
			}
			var refused []uint32
			for len(refused) < extra {
				select {
				case id, ok := <-reset:
					if !ok {
						t.Fatalf("the connection ended after %d calls were refused, want %d refused and the rest held", len(refused), extra)
					}
					refused = append(refused, id)
				case <-time.After(10 * time.Second):
					t.Fatalf("%d of the %d calls past the first %d were refused", len(refused), extra, maxStreamsPerConn)
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
