package server

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// corsCall sends one request to the server at addr as a browser on origin
// would, with extra headers, and returns the answer's status, headers and
// body.
func corsCall(t *testing.T, addr, method, origin string, body []byte, headers map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+"/grpc.health.v1.Health/Check", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func preflight(t *testing.T, addr, origin, requestHeaders string) (int, http.Header) {
	t.Helper()
	code, h, _ := corsCall(t, addr, http.MethodOptions, origin, nil, map[string]string{
		"Access-Control-Request-Method":  http.MethodPost,
		"Access-Control-Request-Headers": requestHeaders,
	})
	return code, h
}

// listed reports whether the comma-separated header value v names want.
func listed(v, want string) bool {
	return slices.ContainsFunc(strings.Split(v, ","), func(s string) bool { return strings.EqualFold(strings.TrimSpace(s), want) })
}

var connectJSON = map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1"}

// A page of an allowed origin gets its preflight answered and may read the
// answers of its Connect and gRPC-Web calls; any other page gets no CORS
// header, so its browser keeps the answer from it.
func TestBrowserCallsFromAllowedOrigins(t *testing.T) {
	addr, _ := startServerWith(t, Config{CORSOrigins: []string{"https://play.example.com", "http://*.studio.test", "capacitor://localhost"}})
	// Browsers name the headers of the call lower-cased and sorted.
	const asked = "authorization,baggage,connect-protocol-version,connect-timeout-ms,content-encoding,content-type,traceparent"

	// An app wrapping a web client (Capacitor) sends its own scheme's.
	for _, origin := range []string{"https://play.example.com", "http://web.studio.test", "capacitor://localhost"} {
		code, h := preflight(t, addr, origin, asked)
		if code/100 != 2 || h.Get("Access-Control-Allow-Origin") != origin {
			t.Fatalf("preflight from %s: %d, allow-origin %q", origin, code, h.Get("Access-Control-Allow-Origin"))
		}
		for _, want := range strings.Split(asked, ",") {
			if !listed(h.Get("Access-Control-Allow-Headers"), want) {
				t.Errorf("preflight from %s: header %s not allowed (%q)", origin, want, h.Get("Access-Control-Allow-Headers"))
			}
		}
		if h.Get("Access-Control-Allow-Methods") != http.MethodPost || h.Get("Access-Control-Max-Age") != "7200" {
			t.Errorf("preflight from %s: methods %q, max-age %q", origin, h.Get("Access-Control-Allow-Methods"), h.Get("Access-Control-Max-Age"))
		}
		if h.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("preflight from %s allows cookies", origin)
		}

		code, h, body := corsCall(t, addr, http.MethodPost, origin, []byte("{}"), connectJSON)
		if code != http.StatusOK || !strings.Contains(body, "SERVING") || h.Get("Access-Control-Allow-Origin") != origin {
			t.Fatalf("Connect call from %s: %d %q, allow-origin %q", origin, code, body, h.Get("Access-Control-Allow-Origin"))
		}
		if !listed(h.Get("Vary"), "Origin") {
			t.Errorf("Connect call from %s: Vary %q lacks Origin, so a cache could serve it to another origin", origin, h.Values("Vary"))
		}

		// gRPC-Web: an empty HealthCheckRequest in one frame; the status
		// of an answer comes in headers or in a trailer frame, and the
		// page must be allowed to read both.
		code, h, body = corsCall(t, addr, http.MethodPost, origin, []byte{0, 0, 0, 0, 0}, map[string]string{"Content-Type": "application/grpc-web+proto", "X-Grpc-Web": "1"})
		if code != http.StatusOK || h.Get("Access-Control-Allow-Origin") != origin || !strings.Contains(strings.ToLower(body), "grpc-status: 0") {
			t.Fatalf("gRPC-Web call from %s: %d %q, allow-origin %q", origin, code, body, h.Get("Access-Control-Allow-Origin"))
		}
		for _, want := range []string{"Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin"} {
			if !listed(h.Get("Access-Control-Expose-Headers"), want) {
				t.Errorf("gRPC-Web call from %s: %s not exposed (%q)", origin, want, h.Get("Access-Control-Expose-Headers"))
			}
		}
	}

	for _, c := range []struct{ name, origin, headers string }{
		{"another origin", "https://evil.example", asked},
		{"another scheme", "http://play.example.com", asked},
		{"a lookalike host", "https://play.example.com.evil.example", asked},
		{"the wildcard's parent", "http://studio.test", asked},
		{"a header no protocol uses", "https://play.example.com", asked + ",x-anything"},
	} {
		if _, h := preflight(t, addr, c.origin, c.headers); h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight from %s (%s) allowed: %v", c.origin, c.name, h)
		}
	}
	// CORS is enforced by browsers: the server still answers a call from
	// another origin, but without the header that would let a page read it.
	if _, h, _ := corsCall(t, addr, http.MethodPost, "https://evil.example", []byte("{}"), connectJSON); h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("call from another origin carries allow-origin %q", h.Get("Access-Control-Allow-Origin"))
	}
}

// Without configured origins no page of another origin may call: nothing
// answers its preflight with CORS headers.
func TestNoCrossOriginCallsByDefault(t *testing.T) {
	addr, _ := startServer(t)
	if _, h := preflight(t, addr, "https://play.example.com", "content-type"); h.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight allowed: %v", h)
	}
	code, h, body := corsCall(t, addr, http.MethodPost, "https://play.example.com", []byte("{}"), connectJSON)
	if code != http.StatusOK || !strings.Contains(body, "SERVING") || h.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("call: %d %q, allow-origin %q", code, body, h.Get("Access-Control-Allow-Origin"))
	}
}

func TestAnyOriginWhenAsked(t *testing.T) {
	addr, _ := startServerWith(t, Config{CORSOrigins: []string{"*"}})
	if _, h := preflight(t, addr, "https://anyone.example", "connect-protocol-version,content-type"); h.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("preflight: %v", h)
	}
}

func TestValidateOrigin(t *testing.T) {
	for _, ok := range []string{"*", "https://play.example.com", "http://localhost:5173", "https://*.example.com", "http://127.0.0.1:8080", "capacitor://localhost", "ionic://localhost",
		// No *: once refused, the word standing in for it when parsed.
		"https://play.wildcardgames.com", "https://my-wildcard.example"} {
		if err := ValidateOrigin(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "play.example.com", "https://play.example.com/", "https://play.example.com/app", "capacitor:localhost", "https://*.*.example.com", "*://example.com", "https://example.com?x=1", "https://user@example.com", "https://",
		// Never matched: browsers send no default port.
		"https://play.example.com:443", "http://localhost:80",
		// Would match https://evilexample.org.
		"https://*example.org", "https://play*.example.org", "*://wildcard.example", "capacitor://*"} {
		if err := ValidateOrigin(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := (Config{Listen: "127.0.0.1:0", CORSOrigins: []string{"https://ok.example", "nope"}}).Validate(); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("config with a bad origin: %v", err)
	}
}

// Headers an app adds (its own, a monitoring SDK's) fail the whole
// preflight unless --cors-headers names them.
func TestExtraHeadersWhenAllowed(t *testing.T) {
	const origin = "https://play.example.com"
	const asked = "connect-protocol-version,content-type,sentry-trace,x-request-id"
	for _, extra := range [][]string{nil, {"X-Request-Id", "sentry-trace"}} {
		addr, _ := startServerWith(t, Config{CORSOrigins: []string{origin}, CORSHeaders: extra})
		_, h := preflight(t, addr, origin, asked)
		allowed := h.Get("Access-Control-Allow-Origin") == origin && listed(h.Get("Access-Control-Allow-Headers"), "sentry-trace") && listed(h.Get("Access-Control-Allow-Headers"), "x-request-id")
		if allowed != (extra != nil) {
			t.Fatalf("extra headers %v: preflight asking for %s: %v", extra, asked, h)
		}
	}
}
