package server

import (
	"errors"
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
		if r.Method == http.MethodPost && r.ContentLength == 0 {
			ct := r.Header.Get("Content-Type")
			switch {
			case isMedia(ct, "application/json"):
				_ = errs.Write(w, r, connect.NewError(connect.CodeInvalidArgument, errEmptyJSON))
				return
			case isMedia(ct, "application/proto") && r.Header.Get("Content-Encoding") == "gzip":
				_ = errs.Write(w, r, connect.NewError(connect.CodeInvalidArgument, errEmptyGzip))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

var (
	errEmptyJSON = errors.New("malformed request: the body is empty, which is no JSON message; send {} for an empty one")
	errEmptyGzip = errors.New("malformed request: the body is empty, which is no gzip stream; send an empty message uncompressed")
)
