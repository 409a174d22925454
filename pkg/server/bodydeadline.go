package server

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// withBodyDeadline has a Connect or gRPC-Web call's request body arrive
// within d of the call's start, else answers DeadlineExceeded. Without
// it a client that sends its headers and then its body a byte at a time
// (or never) holds a connection and a handler for as long as it likes:
// net/http bounds the headers only. No Palace method streams from the
// client, so the body is read whole here, and the deadline lifted before
// the call runs: an event stream's answer lasts as long as it needs. A
// body longer than any accepted request passes on with the deadline
// still set, for the limits behind to refuse it in their own words.
// A Connect call over HTTP/2 of a method that streams from the client
// (reflection, which buf curl uses over Connect) keeps its body open
// while its answers come: only its first message is waited for, as for
// native gRPC, and refused here if it is cut short or longer than any
// accepted. Over HTTP/1.1, whose server reads the rest of a body before
// it answers, such a call is read whole like any other.
func withBodyDeadline(next http.Handler, d time.Duration, maxRecv int, clientStreams map[string]bool) http.Handler {
	if d <= 0 {
		return next
	}
	// The longest body of an accepted request: a grpc-web-text one,
	// base64 of a framed message.
	limit := int64(base64.StdEncoding.EncodedLen(maxRecv+frameHeaderBytes)) + 2
	errs := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			// A writer without deadlines (a test's recorder): nothing to bound.
			next.ServeHTTP(w, r)
			return
		}
		if clientStreams[r.URL.Path] && r.ProtoMajor >= 2 && framedMedia(r.Header.Get("Content-Type"), connectStreaming) {
			head, err := firstMessage(r.Body, maxRecv)
			if refusal := firstMessageRefusal(head, err, d, maxRecv, encodingOf(r, false)); refusal != nil {
				_ = errs.Write(w, r, refusal)
				return
			}
			_ = rc.SetReadDeadline(time.Time{})
			r.Body = afterFirstMessage(r.Body, head, err)
			next.ServeHTTP(w, r)
			return
		}
		head, err := io.ReadAll(io.LimitReader(r.Body, limit))
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			msg := fmt.Sprintf("the request's body did not arrive within %v of its headers (%d bytes came)", d, len(head))
			if strings.HasPrefix(r.Header.Get("Content-Type"), grpcWebText) {
				grpcWebTextError(w, codes.DeadlineExceeded, msg)
			} else {
				_ = errs.Write(w, r, connect.NewError(connect.CodeDeadlineExceeded, errors.New(msg)))
			}
			return
		case err != nil:
			// The client went away, or broke the body: what follows reads
			// the same error as it would have.
			r.Body = readCloser{io.MultiReader(bytes.NewReader(head), errReader{err}), r.Body}
		case int64(len(head)) < limit:
			_ = rc.SetReadDeadline(time.Time{})
			r.Body = readCloser{bytes.NewReader(head), r.Body}
		default:
			r.Body = readCloser{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
		}
		next.ServeHTTP(w, r)
	})
}

// withUnreadBodyDeadline bounds, over HTTP/1.1, the body of a request
// that is not a call (GET /metrics, a Connect GET, a CORS preflight, a
// PUT to a method): its handler reads none of it, and net/http reads it
// before it writes the answer, with no deadline once the headers are in,
// so a client that declares a body and sends none would hold the
// connection and the handler for as long as it likes. Within d the answer
// goes out, and the connection is closed after it if the body has not
// come.
func withUnreadBodyDeadline(next http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 1 && r.Method != http.MethodPost && r.ContentLength != 0 {
			// A writer without deadlines (a test's recorder): nothing to bound.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		next.ServeHTTP(w, r)
	})
}

// firstMessageRefusal is the answer to a call whose first message is
// head, read with err, its messages compressed with encoding: late, cut
// short, longer than any accepted or wrongly flagged; nil for one to pass
// on.
func firstMessageRefusal(head []byte, err error, d time.Duration, maxRecv int, encoding string) *connect.Error {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New(lateMessage(d, head)))
	case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
		return nil // the client went away: the call reads the same error
	case len(head) >= frameHeaderBytes && binary.BigEndian.Uint32(head[1:]) > uint32(maxRecv):
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("the request's message of %d bytes is larger than the most accepted, %d", binary.BigEndian.Uint32(head[1:]), maxRecv))
	}
	msg := cutFrame(head)
	if msg == "" {
		msg = flagsFault(head, encoding)
	}
	if msg != "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("malformed request: "+msg))
	}
	return nil
}

// methodPaths lists the paths of srv's methods that stream from the
// client (clientStream), or those that do not.
func methodPaths(srv *grpc.Server, clientStream bool) map[string]bool {
	out := map[string]bool{}
	for name, info := range srv.GetServiceInfo() {
		for _, m := range info.Methods {
			if m.IsClientStream == clientStream {
				out["/"+name+"/"+m.Name] = true
			}
		}
	}
	return out
}

// errReader fails every read with its error.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
