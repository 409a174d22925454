package server

import (
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// Encoded is a message already in its wire form. A handler that sends one
// message to many streams (a game's event to everyone watching the game)
// encodes it once and passes the same *Encoded to each stream's SendMsg.
type Encoded struct {
	b []byte
	// bs is b as the codec hands it to gRPC, built once: a SliceBuffer is
	// never returned to a pool and its Ref and Free do nothing, so every
	// stream can send the same one, and a send allocates nothing here.
	bs mem.BufferSlice
}

// NewEncoded wraps the wire form of a message; b must not change after.
func NewEncoded(b []byte) *Encoded { return &Encoded{b: b, bs: mem.BufferSlice{mem.SliceBuffer(b)}} }

// Bytes returns the wire form.
func (e *Encoded) Bytes() []byte { return e.b }

// codec is the server's codec: protobuf, except that an *Encoded goes out
// as it is. Compression, when a client asks for it, still applies per
// stream, after the codec.
type codec struct{ proto encoding.CodecV2 }

func newCodec() codec { return codec{proto: encoding.GetCodecV2(protocodec.Name)} }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*Encoded); ok {
		return e.bs, nil
	}
	return c.proto.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

func (c codec) Name() string { return c.proto.Name() }
