package server

import (
	"compress/gzip"
	"fmt"
	"io"
	"math"

	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Connect and gRPC-Web calls reach grpc-go through the transcoder, and
// grpc-go's MaxRecvMsgSize only sees the protobuf the transcoder makes of
// a request: JSON padded with whitespace, or a small gzip body that
// expands a thousandfold, becomes a tiny protobuf after the transcoder has
// buffered all of it (up to 4 GiB by default). These options bound the
// transcoder itself, each refusal a ResourceExhausted before any handler
// runs.

// transcoderLimits are the transcoder options that apply cfg's message
// size limits to the calls it translates.
func transcoderLimits(cfg Config) []vanguard.TranscoderOption {
	// One buffer limit serves both ways: a request and an answer each
	// fit in it. Requests get tighter bounds below.
	buffer := min(max(cfg.MaxRecvBytes, cfg.MaxSendBytes), math.MaxUint32)
	return []vanguard.TranscoderOption{
		vanguard.WithDefaultServiceOptions(
			vanguard.WithMaxMessageBufferBytes(uint32(buffer)),
			// grpc-go is in the same process: compressing for it is wasted
			// work. And as grpc-go compresses an answer only when its
			// request was, the transcoder then only ever decompresses what
			// clients send, which boundedGzip bounds as a request.
			vanguard.WithNoTargetCompression(),
		),
		vanguard.WithCompression("gzip",
			func() connect.Compressor { return gzip.NewWriter(io.Discard) },
			func() connect.Decompressor { return &boundedGzip{limit: int64(cfg.MaxRecvBytes)} },
		),
		vanguard.WithCodec(func(res vanguard.TypeResolver) vanguard.Codec {
			return boundedJSON{JSONCodec: vanguard.NewJSONCodec(res), limit: cfg.MaxRecvBytes}
		}),
	}
}

// tooLarge is the error of a message over a limit, ResourceExhausted as
// grpc-go's own refusal of a message over MaxRecvMsgSize.
func tooLarge(what string, limit int64) error {
	return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%s larger than the server accepts (%d bytes)", what, limit))
}

// boundedGzip is a gzip reader that fails once it has produced more than
// limit bytes: the transcoder decompresses whole messages into memory, and
// its buffer limit only applies to what it reads from the network.
type boundedGzip struct {
	gzip.Reader
	limit, left int64
}

func (d *boundedGzip) Reset(r io.Reader) error {
	d.left = d.limit
	if err := d.Reader.Reset(r); err != nil {
		return notGzip(err)
	}
	return nil
}

func (d *boundedGzip) Read(p []byte) (int, error) {
	// One byte past the limit tells a message of exactly the limit, which
	// is accepted, from a larger one.
	if int64(len(p)) > d.left+1 {
		p = p[:d.left+1]
	}
	n, err := d.Reader.Read(p)
	d.left -= int64(n)
	if d.left < 0 {
		return n, tooLarge("decompressed message", d.limit)
	}
	if err != nil && err != io.EOF {
		return n, notGzip(err)
	}
	return n, err // io.EOF unwrapped: readers compare it
}

// notGzip is the error of a request body that is not the gzip its
// encoding names: the client's fault, InvalidArgument, where the
// transcoder would pass the bare error on as Unknown, a server fault
// (HTTP 500) that clients retry.
func notGzip(err error) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("malformed request: gzip: %w", err))
}

// boundedJSON is the transcoder's JSON codec with MaxRecvBytes applied to
// the JSON text of a request, since the protobuf it turns into keeps none
// of its whitespace. Answers are only marshalled by it, never unmarshalled
// (grpc-go answers in protobuf), so the bound only ever meets requests.
type boundedJSON struct {
	*vanguard.JSONCodec
	limit int
}

func (j boundedJSON) Unmarshal(b []byte, msg proto.Message) error {
	if len(b) > j.limit {
		return tooLarge("JSON message", int64(j.limit))
	}
	return badJSON(j.JSONCodec.Unmarshal(b, msg))
}

// badJSON makes a request's JSON that does not decode InvalidArgument: the
// transcoder would answer Unknown.
func badJSON(err error) error {
	if err == nil {
		return nil
	}
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("malformed request: %w", err))
}

// UnmarshalField serves REST calls, which put a field of the request in
// the body.
func (j boundedJSON) UnmarshalField(b []byte, msg proto.Message, f protoreflect.FieldDescriptor) error {
	if len(b) > j.limit {
		return tooLarge("JSON message", int64(j.limit))
	}
	return badJSON(j.JSONCodec.UnmarshalField(b, msg, f))
}
