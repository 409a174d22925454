package server

import (
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
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

// Unmarshal decodes a request. grpc-go answers a codec's error with
// Internal, a server fault, where the fault is the client's (a string that
// is not UTF-8, bytes that are not protobuf): so a request that does not
// decode is handed on empty, marked with why, and the interceptors answer
// InvalidArgument for it before any handler sees it.
func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.proto.Unmarshal(data, v)
	m, ok := v.(proto.Message)
	if err == nil || !ok {
		return err
	}
	proto.Reset(m)
	mark := protowire.AppendTag(nil, undecodableField, protowire.BytesType)
	m.ProtoReflect().SetUnknown(protowire.AppendString(mark, err.Error()))
	return nil
}

// undecodableField is the field number of the mark: the highest valid one,
// which no Palace message uses.
const undecodableField = protowire.MaxValidNumber

// undecodable returns why a request did not decode, if the codec marked it.
func undecodable(req any) (why string, ok bool) {
	m, isMsg := req.(proto.Message)
	if !isMsg {
		return "", false
	}
	b := m.ProtoReflect().GetUnknown()
	if len(b) == 0 {
		return "", false
	}
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != undecodableField || typ != protowire.BytesType {
		return "", false
	}
	why, n2 := protowire.ConsumeString(b[n:])
	if n2 < 0 || n+n2 != len(b) {
		return "", false
	}
	return why, true
}

func (c codec) Name() string { return c.proto.Name() }
