package server

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
)

// frameHeaderBytes is a gRPC-Web message's prefix: a flags byte and the
// message's length, big-endian.
const frameHeaderBytes = 5

// refuseCutGRPCWebFrames answers InvalidArgument for a binary gRPC-Web
// call whose body holds no whole message: empty, or cut inside a frame.
// grpc-go, behind the transcoder, answers both Internal ("cardinality
// violation", "unexpected EOF"), a server fault that clients retry and
// that counts against the server, where the fault is the client's. No
// Palace method streams from the client, so a request is one message of
// at most maxRecv bytes and is read whole here; a longer body passes on
// unread beyond that, for the transcoder's own limit to refuse it.
func refuseCutGRPCWebFrames(next http.Handler, maxRecv int) http.Handler {
	limit := int64(maxRecv) + frameHeaderBytes + 1
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		rest, ok := strings.CutPrefix(ct, grpcWebBinary)
		if r.Method != http.MethodPost || !ok || (rest != "" && rest[0] != '+' && rest[0] != ';') {
			next.ServeHTTP(w, r)
			return
		}
		head, err := io.ReadAll(io.LimitReader(r.Body, limit))
		if err != nil {
			grpcWebError(w, ct, codes.Unavailable, "reading the request: "+err.Error())
			return
		}
		if int64(len(head)) < limit {
			if msg := cutFrame(head); msg != "" {
				grpcWebError(w, ct, codes.InvalidArgument, "malformed request: "+msg)
				return
			}
		}
		r.Body = readCloser{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
		next.ServeHTTP(w, r)
	})
}

// cutFrame says what is wrong with a request body holding no whole
// gRPC-Web message, or returns "" for one that does.
func cutFrame(body []byte) string {
	switch {
	case len(body) == 0:
		return "the body is empty: a gRPC-Web request holds one message, framed (a flags byte and a 4-byte length), even when the message is empty"
	case len(body) < frameHeaderBytes:
		return fmt.Sprintf("the body ends inside the %d-byte frame header of its message (%d bytes)", frameHeaderBytes, len(body))
	}
	want := binary.BigEndian.Uint32(body[1:frameHeaderBytes])
	if got := uint64(len(body) - frameHeaderBytes); got < uint64(want) {
		return fmt.Sprintf("the message's frame says %d bytes and the body holds %d of them", want, got)
	}
	return ""
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
