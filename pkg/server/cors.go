package server

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/rs/cors"
)

// Browser apps call Palace over Connect and gRPC-Web from their own
// origins (a studio's site, a web client served elsewhere). A browser
// sends such a call only after a preflight that the server answers with
// the origin, methods and headers it accepts, and lets the page read only
// the response headers the server names. Without configured origins no
// CORS header is sent, so browsers keep pages to their own origin.

// corsRequestHeaders are the request headers a cross-origin call may carry:
// those of the Connect and gRPC-Web protocols, the seat or account
// credential, and W3C trace context (with baggage, which OpenTelemetry's
// default propagators send) so that a web client's traces join the
// server's.
var corsRequestHeaders = []string{
	"Authorization",
	"Content-Type",
	"Connect-Protocol-Version",
	"Connect-Timeout-Ms",
	"Connect-Accept-Encoding",
	"Connect-Content-Encoding",
	"Content-Encoding",
	"Grpc-Timeout",
	"Grpc-Accept-Encoding",
	"Grpc-Encoding",
	"X-Grpc-Web",
	"X-User-Agent",
	"Traceparent",
	"Tracestate",
	"Baggage",
}

// corsResponseHeaders are the response headers a page may read: gRPC-Web
// puts the status of a trailers-only answer in headers, and a client needs
// the encodings to decode a compressed answer.
var corsResponseHeaders = []string{
	"Grpc-Status",
	"Grpc-Message",
	"Grpc-Status-Details-Bin",
	"Grpc-Encoding",
	"Grpc-Accept-Encoding",
	"Connect-Content-Encoding",
	"Connect-Accept-Encoding",
	"Content-Encoding",
}

// corsMaxAge is how long a browser may reuse a preflight answer: two hours,
// the most Chromium honours.
const corsMaxAge = 2 * 60 * 60

// withCORS answers preflights and marks the answers of calls from the
// allowed origins, letting them send the protocols' headers and
// extraHeaders (an app's own, a monitoring SDK's). No cookie or client
// certificate is ever accepted as a credential: seats and accounts are
// bearer tokens that the page sends in Authorization itself.
func withCORS(origins, extraHeaders []string, next http.Handler) http.Handler {
	return cors.New(cors.Options{
		AllowedOrigins: origins,
		AllowedMethods: []string{http.MethodGet, http.MethodPost},
		AllowedHeaders: append(slices.Clone(corsRequestHeaders), extraHeaders...),
		ExposedHeaders: corsResponseHeaders,
		MaxAge:         corsMaxAge,
	}).Handler(next)
}

// isPreflight reports whether r is a browser's CORS preflight.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// ValidateOrigin checks one allowed browser origin: "*" (any), or a scheme and a
// host with an optional port and no path, such as https://play.example.com
// or http://localhost:5173, where one "*" may stand for part of the host
// (https://*.example.com).
func ValidateOrigin(o string) error {
	if o == "*" {
		return nil
	}
	star := strings.Contains(o, "*")
	if strings.Count(o, "*") > 1 {
		return fmt.Errorf("CORS origin %q: at most one * is allowed", o)
	}
	if _, rest, _ := strings.Cut(o, "://"); star && !strings.HasPrefix(rest, "*.") {
		// https://*example.org would let https://evilexample.org call.
		return fmt.Errorf("CORS origin %q: * must stand for whole labels at the start of the host, as in https://*.example.com", o)
	}
	// The * checked, a label in its place checks the rest.
	u, err := url.Parse(strings.Replace(o, "*", "x", 1))
	if err != nil {
		return fmt.Errorf("CORS origin %q: %w", o, err)
	}
	// Apps that wrap a web client (Capacitor, Ionic) send origins of their
	// own schemes, such as capacitor://localhost.
	if u.Scheme == "" || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.Opaque != "" {
		return fmt.Errorf("CORS origin %q: want * or scheme://host[:port], such as https://play.example.com or capacitor://localhost", o)
	}
	if p := u.Port(); (u.Scheme == "https" && p == "443") || (u.Scheme == "http" && p == "80") {
		// Browsers leave a default port out of the origin they send, so
		// the entry would never match.
		return fmt.Errorf("CORS origin %q: leave out the default port %s, as browsers do: %s", o, p, strings.TrimSuffix(o, ":"+p))
	}
	return nil
}
