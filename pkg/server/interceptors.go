package server

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recoverUnary turns a handler panic into Internal so that one bad request
// cannot take down a process serving thousands of games.
func recoverUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if p := recover(); p != nil {
				log.ErrorContext(ctx, "panic in handler", "method", info.FullMethod, "panic", p, "stack", string(debug.Stack()))
				err = status.Error(codes.Internal, "internal error")
			}
		}()
		return h(ctx, req)
	}
}

func recoverStream(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		defer func() {
			if p := recover(); p != nil {
				log.ErrorContext(ss.Context(), "panic in stream handler", "method", info.FullMethod, "panic", p, "stack", string(debug.Stack()))
				err = status.Error(codes.Internal, "internal error")
			}
		}()
		return h(srv, ss)
	}
}

// refuseUndecodable answers InvalidArgument for a request the codec could
// not decode (see codec.Unmarshal), or that holds a time its type refuses
// (invalidTime).
func refuseUndecodable(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := checkDecoded(req); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func checkDecoded(req any) error {
	if why, ok := undecodable(req); ok {
		return malformed(why)
	}
	if why, ok := invalidTime(req); ok {
		return malformed(why)
	}
	return nil
}

func refuseUndecodableStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, decodedStream{ss})
}

// decodedStream refuses the messages the codec could not decode.
type decodedStream struct{ grpc.ServerStream }

func (s decodedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		if status.Code(err) == codes.Internal {
			return brokenRequest{err}
		}
		return err
	}
	return checkDecoded(m)
}

// brokenRequest is a request message grpc-go could not read: a cut or
// corrupt frame, bad gzip, unknown flags, no message. grpc-go reads it
// before any code of this server runs and has already answered Internal
// (its RecvMsg writes the status itself); the fault is the client's all
// the same, as over Connect and gRPC-Web, where it is InvalidArgument,
// and is logged as a refusal, not as an ERROR any client could write at
// will.
type brokenRequest struct{ err error }

func (b brokenRequest) Error() string              { return b.err.Error() }
func (b brokenRequest) Unwrap() error              { return b.err }
func (b brokenRequest) GRPCStatus() *status.Status { return status.Convert(b.err) }

func malformed(why string) error {
	return status.Errorf(codes.InvalidArgument, "malformed request: %s", why)
}

// logUnary logs each call once at its end: successes at debug level (a
// busy server makes thousands a second), refusals at info, server faults
// at error.
func logUnary(log *slog.Logger, maxAge time.Duration) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := h(ctx, req)
		logCall(ctx, log, maxAge, info.FullMethod, start, err)
		return resp, err
	}
}

func logStream(log *slog.Logger, maxAge time.Duration) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		start := time.Now()
		err := h(srv, ss)
		logCall(ss.Context(), log, maxAge, info.FullMethod, start, err)
		return err
	}
}

// logCall logs a call that ended with err; maxAge is the connections'
// MaxConnectionAge.
func logCall(ctx context.Context, log *slog.Logger, maxAge time.Duration, method string, start time.Time, err error) {
	code := status.Code(err)
	level := slog.LevelInfo
	switch {
	case code == codes.OK, code == codes.Canceled:
		// A client that hangs up (a stream it leaves, a call it gives up
		// on) is routine.
		level = slog.LevelDebug
	case code == codes.Unavailable && ctx.Err() != nil && mayBeRenewed(ctx, maxAge):
		// A stream its connection's renewal cut, which its client
		// resumes: as routine, and with every long stream every
		// MaxConnectionAge.
		level = slog.LevelDebug
	case code == codes.Unavailable:
		// A dependency away (Redis, a peer) or a stop ending streams: each
		// call it fails is worth a line, but the outage itself is reported
		// once by whoever saw it, and an operator's alerts on ERROR must not
		// fire a thousand times for one restart.
		level = slog.LevelWarn
	case code == codes.Internal, code == codes.Unknown, code == codes.DataLoss:
		level = slog.LevelError
	}
	if errors.As(err, new(brokenRequest)) {
		level = slog.LevelInfo
	}
	var cause interface{ CauseLogged() bool }
	if level > slog.LevelInfo && errors.As(err, &cause) && cause.CauseLogged() {
		// Its cause is logged already, at this level, with what it was
		// (apierr.ToStatus): one fault, one line that alerts count.
		level = slog.LevelInfo
	}
	log.Log(ctx, level, "rpc", "method", method, "code", code.String(), "duration_ms", float64(time.Since(start).Microseconds())/1000)
}

// drainStream ends every stream when drain is cancelled. Event and ticket
// streams never end by themselves, so a graceful stop would otherwise wait
// out its whole timeout; ended with Unavailable, their clients reconnect to
// another replica and resume from the last version they saw.
func drainStream(drain context.Context) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		ctx, cancel := context.WithCancel(ss.Context())
		defer cancel()
		stop := context.AfterFunc(drain, cancel)
		defer stop()
		err := h(srv, &ctxStream{ServerStream: ss, ctx: ctx})
		// A stream the drain ended, whatever its handler returned (a
		// handler may well return nil when its context ends), must not end
		// with OK: that tells a client the stream is complete (a game
		// over), not to resume elsewhere.
		if drain.Err() != nil && ss.Context().Err() == nil && (err != nil || ctx.Err() != nil) {
			return status.Error(codes.Unavailable, "server is shutting down: reconnect and resume")
		}
		if status.Code(err) == codes.Unavailable && errors.Is(ss.Context().Err(), context.Canceled) {
			// The client left while the handler sent to it: grpc-go fails
			// the send of a call that came through net/http (Connect,
			// gRPC-Web) "transport is closing", which is no outage; no
			// answer reaches a client gone.
			return status.Error(codes.Canceled, "request cancelled")
		}
		return err
	}
}

// ctxStream is a server stream with another context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }
