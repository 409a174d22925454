package server

import (
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
