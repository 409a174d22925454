package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"connectrpc.com/connect"
)

// refuseEmptyBody answers InvalidArgument for a Connect unary call whose
// body is empty where that is no message: in JSON (an empty message is
// {}), or gzip-compressed (gzip of an empty message is a header and a
// trailer). The transcoder would hand grpc-go no message at all, which
// grpc-go answers with Internal, a server fault.
func refuseEmptyBody(next http.Handler) http.Handler {
	errs := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.ContentLength <= 0 {
			ct := r.Header.Get("Content-Type")
			var err error
			switch {
			case isMedia(ct, "application/json"):
				err = errEmptyJSON
			case isMedia(ct, "application/proto") && r.Header.Get("Content-Encoding") == "gzip":
				err = errEmptyGzip
			}
			if err != nil && emptyBody(r) {
				_ = errs.Write(w, r, connect.NewError(connect.CodeInvalidArgument, err))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// emptyBody reports whether r's body is empty, reading ahead one byte when
// its length was not announced (a chunked HTTP/1.1 body, an HTTP/2 one
// without content-length), which the body then still holds.
func emptyBody(r *http.Request) bool {
	if r.ContentLength == 0 {
		return true
	}
	var b [1]byte
	n, err := io.ReadFull(r.Body, b[:])
	if n == 0 && err == io.EOF {
		return true
	}
	var rest io.Reader = r.Body
	if err != nil && n == 0 {
		// The client went away, or broke the body: what follows reads the
		// same error as it would have.
		rest = errReader{err}
	}
	r.Body = readCloser{io.MultiReader(bytes.NewReader(b[:n]), rest), r.Body}
	return false
}

var (
	errEmptyJSON = errors.New("malformed request: the body is empty, which is no JSON message; send {} for an empty one")
	errEmptyGzip = errors.New("malformed request: the body is empty, which is no gzip stream; send an empty message uncompressed")
)
