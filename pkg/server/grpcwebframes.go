package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/grpc/codes"
)

// frameHeaderBytes is a gRPC-Web message's prefix: a flags byte and the
// message's length, big-endian.
const frameHeaderBytes = 5

// refuseCutFrames answers InvalidArgument for a binary gRPC-Web call, or
// a Connect stream's, whose body is not one whole message: empty, cut
// inside a frame, or with bytes after it (both frame a message alike: a
// flags byte and its length). grpc-go, behind the transcoder, answers
// these Internal ("cardinality violation", "unexpected EOF"), a server fault that
// clients retry and that counts against the server, where the fault is
// the client's. No Palace method streams from the client, so a request is
// one message of at most maxRecv bytes and is read whole here; a longer
// body passes on unread beyond that, for the transcoder's own limit to
// refuse it. A Connect stream of a path in clientStreams (reflection)
// passes on unread: withBodyDeadline checks its first message over
// HTTP/2, and over HTTP/1.1 the transcoder refuses the call whole.
func refuseCutFrames(next http.Handler, maxRecv int, clientStreams map[string]bool) http.Handler {
	limit := int64(maxRecv) + frameHeaderBytes + 1
	errs := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		grpcWeb, connectStream := framedMedia(ct, grpcWebBinary), framedMedia(ct, connectStreaming)
		if r.Method != http.MethodPost || !grpcWeb && !connectStream || connectStream && clientStreams[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		refuse := func(code codes.Code, msg string) {
			if grpcWeb {
				grpcWebError(w, ct, code, msg)
				return
			}
			_ = errs.Write(w, r, connect.NewError(connect.Code(code), errors.New(msg)))
		}
		head, err := io.ReadAll(io.LimitReader(r.Body, limit))
		if err != nil {
			refuse(codes.Unavailable, "reading the request: "+err.Error())
			return
		}
		msg := ""
		if int64(len(head)) < limit {
			msg = cutFrame(head)
		} else if n := afterMessage(head); n > 0 {
			// Longer than any message may be, but its first message ends
			// inside what was read: the rest is more than one message.
			msg = fmt.Sprintf("the body holds more than %d bytes after its message: a request holds one message", n)
		}
		if msg == "" {
			msg = flagsFault(head, encodingOf(r, grpcWeb))
		}
		if msg != "" {
			refuse(codes.InvalidArgument, "malformed request: "+msg)
			return
		}
		r.Body = readCloser{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
		next.ServeHTTP(w, r)
	})
}

// connectStreaming is the media type of a Connect stream's request, before
// its codec (+proto, +json).
const connectStreaming = "application/connect"

// framedMedia reports whether contentType is media, with or without a
// codec (+proto) or parameters.
func framedMedia(contentType, media string) bool {
	rest, ok := strings.CutPrefix(contentType, media)
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

// cutFrame says what is wrong with a request body that is not one whole
// gRPC-Web message, or returns "" for one that is.
func cutFrame(body []byte) string {
	switch {
	case len(body) == 0:
		return "the body is empty: a gRPC-Web or Connect stream request holds one message, framed (a flags byte and a 4-byte length), even when the message is empty"
	case len(body) < frameHeaderBytes:
		return fmt.Sprintf("the body ends inside the %d-byte frame header of its message (%d bytes)", frameHeaderBytes, len(body))
	}
	want := binary.BigEndian.Uint32(body[1:frameHeaderBytes])
	if got := uint64(len(body) - frameHeaderBytes); got < uint64(want) {
		return fmt.Sprintf("the message's frame says %d bytes and the body holds %d of them", want, got)
	}
	if n := afterMessage(body); n > 0 {
		// grpc-go answers a second message "cardinality violation", and a
		// cut one "unexpected EOF", both Internal.
		return fmt.Sprintf("the body holds %d bytes after its message: a request holds one message", n)
	}
	return ""
}

// flagsFault says what is wrong with the flags of the frame body begins
// with, in a call whose messages are compressed with encoding: a flag no
// request may carry, or a message flagged compressed where the call names
// no encoding, which grpc-go answers Internal, a server fault; "" when
// nothing is.
func flagsFault(body []byte, encoding string) string {
	if len(body) == 0 {
		return ""
	}
	switch f := body[0]; {
	case f&^1 != 0:
		return fmt.Sprintf("the message's frame has flags %#x: a request's message may only be flagged compressed (1)", f)
	case f == 1 && (encoding == "" || encoding == "identity"):
		return "the message is flagged compressed, but the call names no encoding (Connect-Content-Encoding, grpc-encoding)"
	}
	return ""
}

// encodingOf is the encoding a Connect stream or gRPC-Web call names for
// its messages.
func encodingOf(r *http.Request, grpcWeb bool) string {
	if grpcWeb {
		return r.Header.Get("Grpc-Encoding")
	}
	return r.Header.Get("Connect-Content-Encoding")
}

// afterMessage is how many of body's bytes follow its first message, 0
// when the message does not end within body.
func afterMessage(body []byte) int {
	if len(body) < frameHeaderBytes {
		return 0
	}
	want := uint64(binary.BigEndian.Uint32(body[1:frameHeaderBytes]))
	return int(max(0, int64(len(body)-frameHeaderBytes)-int64(want)))
}

// grpcWebError answers a gRPC-Web call trailers-only, the status in the
// headers.
func grpcWebError(w http.ResponseWriter, contentType string, code codes.Code, msg string) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Grpc-Status", strconv.Itoa(int(code)))
	h.Set("Grpc-Message", url.PathEscape(msg))
	w.WriteHeader(http.StatusOK)
}

// readCloser reads from one reader and closes another: the request's own
// body, whatever of it was read ahead.
type readCloser struct {
	io.Reader
	io.Closer
}
