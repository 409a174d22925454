package server

import (
	"errors"
	"net/http"

	"connectrpc.com/connect"
)

// refuseEmptyJSON answers InvalidArgument for a Connect unary call whose
// JSON body is empty. That is no JSON message (an empty one is {}), and the
// transcoder would hand grpc-go no message at all, which grpc-go answers
// with Internal, a server fault.
func refuseEmptyJSON(next http.Handler) http.Handler {
	errs := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.ContentLength == 0 && isMedia(r.Header.Get("Content-Type"), "application/json") {
			_ = errs.Write(w, r, connect.NewError(connect.CodeInvalidArgument, errEmptyJSON))
			return
		}
		next.ServeHTTP(w, r)
	})
}

var errEmptyJSON = errors.New("malformed request: the body is empty, which is no JSON message; send {} for an empty one")
