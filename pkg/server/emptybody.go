package server

import (
	"io"
	"net/http"
)

// refuseEmptyJSON answers InvalidArgument for a Connect unary call whose
// JSON body is empty. That is no JSON message (an empty one is {}), and the
// transcoder would hand grpc-go no message at all, which grpc-go answers
// with Internal, a server fault.
func refuseEmptyJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.ContentLength == 0 && isMedia(r.Header.Get("Content-Type"), "application/json") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"code":"invalid_argument","message":"malformed request: the body is empty, which is no JSON message; send {} for an empty one"}`)
			return
		}
		next.ServeHTTP(w, r)
	})
}
