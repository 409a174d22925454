package server

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"strings"
)

// The gRPC-Web protocol asks for lower-case trailer names in the trailer
// frame that ends a stream's body, and Google's grpc-web library looks
// them up case-sensitively; the transcoder writes them in Go's canonical
// case (Grpc-Status). That library then takes a stream ended by an error
// after its first message (a server stopping: Unavailable, reconnect and
// resume) for a stream ended well. So the trailer frame's names are
// lower-cased on the way out, in binary and text mode alike (text mode
// encodes what this writes).

// withLowerTrailers serves gRPC-Web calls through next with their
// trailer frame's names lower-cased; other requests pass unchanged.
func withLowerTrailers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Content-Type"), grpcWebBinary) {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&trailerWriter{ResponseWriter: w}, r)
	})
}

// trailerWriter passes gRPC-Web frames through as they are written, and
// holds the trailer frame (flag 0x80) until it is whole, to write it with
// its names lower-cased.
type trailerWriter struct {
	http.ResponseWriter
	hdr       [5]byte
	nh        int  // bytes of hdr read of the next frame
	left      int  // bytes left of the current frame's payload
	inTrailer bool // the current frame is the trailer frame
	trailer   []byte
}

func (t *trailerWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		if t.left == 0 && !t.inTrailer {
			k := copy(t.hdr[t.nh:], b)
			t.nh += k
			b = b[k:]
			if t.nh < len(t.hdr) {
				break
			}
			t.nh = 0
			t.left = int(binary.BigEndian.Uint32(t.hdr[1:]))
			if t.hdr[0]&0x80 != 0 {
				t.inTrailer, t.trailer = true, t.trailer[:0]
				if t.left == 0 {
					if err := t.writeTrailer(); err != nil {
						return 0, err
					}
				}
				continue
			}
			if _, err := t.ResponseWriter.Write(t.hdr[:]); err != nil {
				return 0, err
			}
			continue
		}
		k := min(t.left, len(b))
		t.left -= k
		if t.inTrailer {
			t.trailer = append(t.trailer, b[:k]...)
			b = b[k:]
			if t.left == 0 {
				if err := t.writeTrailer(); err != nil {
					return 0, err
				}
			}
			continue
		}
		if _, err := t.ResponseWriter.Write(b[:k]); err != nil {
			return 0, err
		}
		b = b[k:]
	}
	return n, nil
}

// writeTrailer writes the held trailer frame, each "Name: value" line's
// name lower-cased (names are ASCII: the length stays).
func (t *trailerWriter) writeTrailer() error {
	t.inTrailer = false
	lines := bytes.SplitAfter(t.trailer, []byte("\r\n"))
	for _, line := range lines {
		if i := bytes.IndexByte(line, ':'); i > 0 {
			copy(line, bytes.ToLower(line[:i]))
		}
	}
	if _, err := t.ResponseWriter.Write(t.hdr[:]); err != nil {
		return err
	}
	_, err := t.ResponseWriter.Write(t.trailer)
	return err
}

// Flush sends what was written; a trailer frame still incomplete stays
// held until its last byte.
func (t *trailerWriter) Flush() {
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (t *trailerWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }
