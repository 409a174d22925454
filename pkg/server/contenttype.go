package server

import (
	"fmt"
	"mime"
	"net/http"
	"strings"
)

// withJSONCharset serves Connect calls in JSON whose Content-Type names
// the charset UTF-8, in any spelling, as the bare JSON media type. JSON is
// UTF-8 (RFC 8259), and clients spell the parameter as they like: axios
// before 1.0 sends "application/json;charset=utf-8", Java's clients
// "UTF-8". Connect's own servers accept them all; the transcoder knows
// only "application/json; charset=utf-8", and refused the others with 415.
// Another charset, or another parameter, passes unchanged and is refused.
func withJSONCharset(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		if !strings.Contains(ct, ";") {
			next.ServeHTTP(w, r)
			return
		}
		media, params, err := mime.ParseMediaType(ct)
		if err == nil && (media == "application/json" || media == "application/connect+json") &&
			len(params) == 1 && strings.EqualFold(params["charset"], "utf-8") {
			r = r.Clone(r.Context())
			r.Header.Set("Content-Type", media)
		}
		next.ServeHTTP(w, r)
	})
}

// servedMedia lists, for Accept-Post and the message of a refusal, the
// media types of the calls this port serves.
const servedMedia = "application/json, application/proto, application/connect+json, application/connect+proto, application/grpc-web+proto, application/grpc-web+json, application/grpc-web-text"

// refuseUnknownMedia answers 415, naming what is served, a POST whose
// Content-Type no protocol takes. A browser's fetch with a string body and
// no Content-Type sends text/plain, which the transcoder answered 404 "Not
// Found", as if the method's path were wrong, and other types with a bare
// "sub-format not supported".
func refuseUnknownMedia(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || rpcMedia(r.Header.Get("Content-Type")) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Accept-Post", servedMedia)
		http.Error(w, fmt.Sprintf("Content-Type %q is not one of a call's: Connect sends application/json (with the header Connect-Protocol-Version: 1) or application/proto, its streams application/connect+json or +proto; gRPC-Web sends application/grpc-web+proto, +json or application/grpc-web-text", r.Header.Get("Content-Type")), http.StatusUnsupportedMediaType)
	})
}

// rpcMedia reports whether a Content-Type is that of a call in some
// protocol (Connect, gRPC-Web, gRPC), whatever its codec.
func rpcMedia(ct string) bool {
	media, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return media == "application/json" || media == "application/proto" ||
		strings.HasPrefix(media, "application/connect+") || media == "application/grpc" || strings.HasPrefix(media, "application/grpc+") ||
		strings.HasPrefix(media, "application/grpc-web")
}
