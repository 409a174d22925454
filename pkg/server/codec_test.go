package server

import (
	"bytes"
	"sync"
	"testing"

	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
)

func TestCodecSendsEncodedAsItIs(t *testing.T) {
	c := newCodec()
	msg := &grpc_health_v1.HealthCheckRequest{Service: "palace.game.v1.GameService"}
	want, _ := proto.Marshal(msg)
	got, err := c.Marshal(msg)
	if err != nil || !bytes.Equal(got.Materialize(), want) {
		t.Fatalf("a message: %x, %v; want %x", got.Materialize(), err, want)
	}
	enc := NewEncoded(want)
	for range 2 { // the same bytes, again and again
		got, err := c.Marshal(enc)
		if err != nil || !bytes.Equal(got.Materialize(), want) {
			t.Fatalf("an Encoded: %x, %v; want %x", got.Materialize(), err, want)
		}
		got.Free()
	}
	var back grpc_health_v1.HealthCheckRequest
	if err := c.Unmarshal(got, &back); err != nil || !proto.Equal(&back, msg) {
		t.Fatalf("unmarshal: %v, %v", &back, err)
	}
	if c.Name() != "proto" {
		t.Fatalf("name %q", c.Name())
	}
}

// TestEncodedSendsShareOneBuffer: sending an Encoded allocates nothing, and
// many streams may send it at once, each freeing what it sent (run with
// -race).
func TestEncodedSendsShareOneBuffer(t *testing.T) {
	c := newCodec()
	want := []byte("an event, encoded once")
	enc := NewEncoded(want)
	if n := testing.AllocsPerRun(100, func() {
		bs, _ := c.Marshal(enc)
		bs.Free()
	}); n != 0 {
		t.Fatalf("%v allocations per send, want 0", n)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				bs, err := c.Marshal(enc)
				if err != nil {
					t.Error(err)
					return
				}
				bs.Ref()
				if got := bs.Materialize(); !bytes.Equal(got, want) {
					t.Errorf("sent %q, want %q", got, want)
					return
				}
				bs.Free()
				bs.Free()
			}
		})
	}
	wg.Wait()
	if !bytes.Equal(enc.Bytes(), []byte("an event, encoded once")) {
		t.Fatalf("the encoded bytes changed: %q", enc.Bytes())
	}
}
