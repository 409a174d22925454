package server

import (
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// refuseUnknownGRPCWebMethods answers a gRPC-Web call of a method the
// server does not serve Unimplemented, as native gRPC does. The
// transcoder answers it HTTP 404 with no grpc-status, which Google's
// grpc-web library reads as NOT_FOUND: an app calling a method an older
// server lacks would be told its game was not found, which Palace answers
// for a game that expired. Connect's own 404 is its protocol's answer and
// passes on. Inside the gRPC-Web text layer, which has made the call
// binary.
func refuseUnknownGRPCWebMethods(next http.Handler, srv *grpc.Server) http.Handler {
	known := map[string]bool{}
	for name, info := range srv.GetServiceInfo() {
		for _, m := range info.Methods {
			known["/"+name+"/"+m.Name] = true
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		if r.Method != http.MethodPost || !framedMedia(ct, grpcWebBinary) || known[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		service, method, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		grpcWebError(w, ct, codes.Unimplemented, "unknown method "+method+" of service "+service)
	})
}
