package server

import (
	"context"

	"google.golang.org/grpc"
	// Registers gzip, for requests clients compress and for answers worth
	// compressing (CompressLarge).
	_ "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/protobuf/proto"
)

// compressFrom is the size from which an answer is worth compressing: a
// smaller one gains a few bytes at the cost of a gzip stream's overhead.
const compressFrom = 1 << 10

// CompressLarge has a unary answer sent gzip-compressed when it is large
// and the gRPC client accepts gzip: a game read with its whole move list
// shrinks about tenfold, which a phone on a slow network feels. Small
// answers, and clients that do not accept gzip, are sent as they are.
// Connect and gRPC-Web calls reach grpc-go through its ServeHTTP
// transport, which does not learn what the client accepts, so this does
// nothing for them; withUnaryGzip compresses Connect unary answers.
func CompressLarge(ctx context.Context, answer proto.Message) {
	if proto.Size(answer) < compressFrom {
		return
	}
	// Refused when the client does not accept gzip: then it is not used.
	_ = grpc.SetSendCompressor(ctx, "gzip")
}
