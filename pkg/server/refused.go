package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// The transcoder decodes a Connect or gRPC-Web request while grpc-go
// reads it. When the request does not decode (bad JSON) or is too large,
// the transcoder answers the client itself, with InvalidArgument or
// ResourceExhausted, and grpc-go only sees its request body end early
// or fail: it ends the call Internal, which its metrics count and its stream
// handlers log as a server fault. So alerting on server faults fired on
// every client that sent bad JSON. The transcoder's refusal is kept in
// the request's context, where the stats handler and the stream
// interceptors find it and report the call as it was answered.

// refusalKey is the context key of a call's *refusal.
type refusalKey struct{}

// refusal is the transcoder's refusal of a call's request, if any.
type refusal struct{ err atomic.Pointer[status.Status] }

// refusedRequest is the status the transcoder answered ctx's call with,
// having refused its request; nil if it did not.
func refusedRequest(ctx context.Context) *status.Status {
	r, _ := ctx.Value(refusalKey{}).(*refusal)
	if r == nil {
		return nil
	}
	return r.err.Load()
}

// noteRefusals wraps the gRPC handler the transcoder calls: a request
// body that fails with the transcoder's own error records it.
func noteRefusals(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ref := new(refusal)
		r = r.WithContext(context.WithValue(r.Context(), refusalKey{}, ref))
		r.Body = &refusingBody{ReadCloser: r.Body, ref: ref}
		h.ServeHTTP(w, r)
	})
}

type refusingBody struct {
	io.ReadCloser
	ref *refusal
	// read: the transcoder passed on some of the request.
	read bool
}

func (b *refusingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.read = true
	}
	if errors.Is(err, io.EOF) && !b.read {
		// A request grpc-go is given always starts with an envelope: the
		// transcoder refused this one as it decoded it. It answers a read
		// after a refusal with the refusal itself. (Only a first message
		// is told apart so: every request of these services is one.)
		_, err2 := b.ReadCloser.Read(nil)
		b.note(err2)
		return n, err
	}
	b.note(err)
	return n, err // unwrapped: readers compare io.EOF
}

// note records err if it is the transcoder's refusal.
func (b *refusingBody) note(err error) {
	var ce *connect.Error
	if err != nil && errors.As(err, &ce) {
		// Connect's codes are gRPC's, number for number.
		b.ref.err.CompareAndSwap(nil, status.New(codes.Code(ce.Code()), ce.Message()))
	}
}

// refusalStats reports a call whose request the transcoder refused with
// the transcoder's status, not grpc-go's Internal.
type refusalStats struct{ stats.Handler }

func (h refusalStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if end, ok := s.(*stats.End); ok && end.Error != nil {
		if st := refusedRequest(ctx); st != nil {
			e := *end
			e.Error = st.Err()
			s = &e
		}
	}
	h.Handler.HandleRPC(ctx, s)
}

// refusedStream makes a stream handler whose request the transcoder
// refused end with the transcoder's status, so that it is logged as the
// client's fault.
func refusedStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	err := h(srv, ss)
	if err != nil {
		if st := refusedRequest(ss.Context()); st != nil {
			return st.Err()
		}
	}
	return err
}

// newTranscoder is vanguardgrpc.NewTranscoder, but for the handler it
// calls: grpc's, with the transcoder's refusals noted.
func newTranscoder(g *grpc.Server, opts ...vanguard.TranscoderOption) (*vanguard.Transcoder, error) {
	codecs := []string{vanguard.CodecProto}
	if encoding.GetCodec(vanguard.CodecJSON) != nil {
		codecs = append(codecs, vanguard.CodecJSON)
	}
	h := noteRefusals(g)
	var services []*vanguard.Service
	for name := range g.GetServiceInfo() {
		services = append(services, vanguard.NewService(name, h))
	}
	all := append([]vanguard.TranscoderOption{vanguard.WithDefaultServiceOptions(
		vanguard.WithTargetCodecs(codecs...),
		vanguard.WithTargetProtocols(vanguard.ProtocolGRPC),
	)}, opts...)
	t, err := vanguard.NewTranscoder(services, all...)
	if err != nil {
		return nil, fmt.Errorf("transcoder: %w", err)
	}
	return t, nil
}
