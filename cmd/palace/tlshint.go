package main

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// withTLSHint adds to a client's refusals, when the connection failed in
// its first bytes because client and server disagree on TLS, the flag
// that fixes it: gRPC's own words ("http2: frame too large") name only
// the symptom.
func withTLSHint(creds credentials.TransportCredentials) []grpc.DialOption {
	usesTLS := creds.Info().SecurityProtocol == "tls"
	hint := func(err error) error {
		s, ok := status.FromError(err)
		if !ok || s.Code() != codes.Unavailable {
			return err
		}
		msg := s.Message()
		switch {
		case !usesTLS && strings.Contains(msg, "server preface") && strings.Contains(msg, "frame too large"):
			return status.Error(codes.Unavailable, msg+" (the server did not answer in plaintext HTTP/2: if it serves TLS, add --tls with its CA certificates, or --tls system)")
		case !usesTLS && strings.Contains(msg, "connection reset by peer"):
			// What a TLS server does to plaintext too, when it closes
			// before the client has written its first request.
			return status.Error(codes.Unavailable, msg+" (if the server serves TLS, add --tls with its CA certificates, or --tls system)")
		case usesTLS && strings.Contains(msg, "first record does not look like a TLS handshake"):
			return status.Error(codes.Unavailable, msg+" (the server answered in plaintext: drop --tls)")
		}
		return err
	}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return hint(invoker(ctx, method, req, reply, cc, opts...))
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			st, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, hint(err)
			}
			return hintedStream{st, hint}, nil
		}),
	}
}

// hintedStream hints at a TLS mismatch on a stream's first receive, where
// a connection that never came up is reported.
type hintedStream struct {
	grpc.ClientStream
	hint func(error) error
}

func (s hintedStream) RecvMsg(m any) error { return s.hint(s.ClientStream.RecvMsg(m)) }
