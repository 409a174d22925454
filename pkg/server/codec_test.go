package server

import (
	"bytes"
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
