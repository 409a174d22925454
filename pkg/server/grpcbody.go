package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/tap"
)

// A native gRPC call's request message must arrive within
// Config.BodyTimeout of its headers, as a Connect or gRPC-Web call's body
// must (withBodyDeadline). grpc-go bounds that wait by the client's own
// deadline alone: a client that sends headers and never its message, or
// part of it, would hold a stream, a goroutine and their buffers, up to
// maxStreamsPerConn of them per connection, for as long as its connection
// lives, and its connection lives as long as it answers keepalive pings.
//
// On grpc-go's own transport (awaitBody) a request is read under the
// call's context, so until the request has come that context ends
// DeadlineExceeded at the timeout; its arrival lifts it (requestCame), and
// the call runs as long as it needs. grpc-go answers such a call itself,
// as "context deadline exceeded", before any code of ours could word it
// better. On connections net/http serves, withFirstMessageDeadline reads
// the request first.
//
// A method that does not stream from the client has its request come
// with the end of the client's half of the stream, which grpc-go waits
// for before the call runs: a client that sends its message and never
// that end would otherwise hold the call past the timeout. A method that
// streams from the client has it come with its first message.

// bodyWait is a call's context until its request message has arrived:
// its parent's, ending with it, or at the timeout if no message came by
// then. It does not report the timeout as its deadline, which the call's
// handler could mistake for the client's. Contexts derived from it end
// with it (Canceled, their cause errLateBody); it reads DeadlineExceeded
// itself, as grpc-go's reader of the request sees it.
type bodyWait struct {
	context.Context // a cancelable child of the call's context
	timer           *time.Timer
}

// errLateBody is the cause a bodyWait ends with at its timeout.
var errLateBody = errors.New("the request's message did not arrive in time")

// bodyWaitKey finds a call's bodyWait in its context.
type bodyWaitKey struct{}

func newBodyWait(parent context.Context, limit time.Duration) *bodyWait {
	ctx, end := context.WithCancelCause(parent)
	w := &bodyWait{Context: ctx}
	// Once the context has ended, by its parent or in time, ending it
	// again changes nothing: its Err never changes.
	w.timer = time.AfterFunc(limit, func() { end(errLateBody) })
	return w
}

// arrive lifts the timeout: the request has come.
func (w *bodyWait) arrive() { w.timer.Stop() }

func (w *bodyWait) Err() error {
	err := w.Context.Err()
	if err != nil && errors.Is(context.Cause(w.Context), errLateBody) {
		return context.DeadlineExceeded
	}
	return err
}

func (w *bodyWait) Value(key any) any {
	if key == (bodyWaitKey{}) {
		return w
	}
	return w.Context.Value(key)
}

// awaitBody starts the timeout of each call grpc-go's transport takes.
func awaitBody(limit time.Duration) tap.ServerInHandle {
	return func(ctx context.Context, _ *tap.Info) (context.Context, error) {
		return newBodyWait(ctx, limit), nil
	}
}

// requestCame lifts a unary call's timeout: its interceptors run once
// grpc-go has read its message and the end of its half of the stream.
func requestCame(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	lift(ctx)
	return h(ctx, req)
}

// requestCameStream lifts a streaming call's timeout as its handler's
// first read returns: for a method that does not stream from the client,
// with its message and the end of its half of the stream; for one that
// does, with its first message.
func requestCameStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, liftingStream{ss})
}

type liftingStream struct{ grpc.ServerStream }

func (s liftingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	lift(s.Context())
	return err
}

// lift ends the wait for the request of the call whose context is ctx.
func lift(ctx context.Context) {
	if w, ok := ctx.Value(bodyWaitKey{}).(*bodyWait); ok {
		w.arrive()
	}
}

// withFirstMessageDeadline bounds the wait for a native gRPC call's
// request on a connection net/http serves, which grpc-go reads through
// its handler transport: that one ends a call whose request context ends
// without answering it, so the request is read here, under a read
// deadline, and the call refused in its own words if it is late. A call
// of a method in clientStreams (reflection) waits for its first message
// only; one in oneMessage, for the end of the client's half of the stream
// too, which grpc-go waits for before it runs the call; one of a method
// the server does not have passes on at once, for grpc-go to answer
// Unimplemented, as it does on its own transport, without reading a
// thing. A message declared longer than any accepted passes on at once,
// for grpc-go to refuse.
func withFirstMessageDeadline(next http.Handler, d time.Duration, maxRecv int, clientStreams, oneMessage map[string]bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !clientStreams[r.URL.Path] && !oneMessage[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			next.ServeHTTP(w, r)
			return
		}
		head, err := firstMessage(r.Body, maxRecv)
		if err == nil && binary.BigEndian.Uint32(head[1:]) <= uint32(maxRecv) && oneMessage[r.URL.Path] {
			// What follows the message is its end; anything else, up to a
			// message's worth, is passed on for grpc-go to refuse.
			var more []byte
			more, err = io.ReadAll(io.LimitReader(r.Body, int64(frameHeaderBytes+maxRecv)))
			if errors.Is(err, os.ErrDeadlineExceeded) {
				grpcWebError(w, r.Header.Get("Content-Type"), codes.DeadlineExceeded, fmt.Sprintf("the request's message came, but not the end of the request within %v of its headers: a call of this method takes one message, and runs once the client has closed its side of the stream", d))
				return
			}
			head = append(head, more...)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			grpcWebError(w, r.Header.Get("Content-Type"), codes.DeadlineExceeded, lateMessage(d, head))
			return
		}
		_ = rc.SetReadDeadline(time.Time{})
		r.Body = afterFirstMessage(r.Body, head, err)
		next.ServeHTTP(w, r)
	})
}

// firstMessage reads a framed body's first message, as far as it comes:
// its header and, unless it is declared longer than any accepted, the
// message.
func firstMessage(body io.Reader, maxRecv int) ([]byte, error) {
	head := make([]byte, frameHeaderBytes)
	n, err := io.ReadFull(body, head)
	head = head[:n]
	if err == nil {
		if size := binary.BigEndian.Uint32(head[1:]); size <= uint32(maxRecv) {
			// Read as it comes: a declared size reserves nothing.
			var msg []byte
			msg, err = io.ReadAll(io.LimitReader(body, int64(size)))
			head = append(head, msg...)
		}
	}
	return head, err
}

// lateMessage says that a call's first message did not arrive within d.
func lateMessage(d time.Duration, head []byte) string {
	return fmt.Sprintf("the request's message did not arrive within %v of its headers (%d bytes came)", d, len(head))
}

// afterFirstMessage is body again, head (what firstMessage read, with err)
// first.
func afterFirstMessage(body io.ReadCloser, head []byte, err error) io.ReadCloser {
	rest := io.Reader(body)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		// The client went away, or broke the body: the call reads the
		// same error as it would have.
		rest = errReader{err}
	}
	return readCloser{io.MultiReader(bytes.NewReader(head), rest), body}
}
