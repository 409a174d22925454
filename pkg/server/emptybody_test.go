package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// An empty Connect JSON body is refused invalid_argument whether or not
// the client announced its length: a chunked HTTP/1.1 body, or an HTTP/2
// one without content-length, is as empty as Content-Length: 0.
func TestAnEmptyJSONBodyOfUnknownLengthIsInvalidArgument(t *testing.T) {
	addr, _, calls := startCountingGame(t)
	for _, p := range []struct {
		name  string
		proto func(*http.Protocols)
	}{
		{"http1 chunked", func(p *http.Protocols) { p.SetHTTP1(true) }},
		{"h2c without content-length", func(p *http.Protocols) { p.SetUnencryptedHTTP2(true) }},
	} {
		t.Run(p.name, func(t *testing.T) {
			var protos http.Protocols
			p.proto(&protos)
			hc := &http.Client{Transport: &http.Transport{Protocols: &protos}, Timeout: 10 * time.Second}
			// An io.Reader of unknown length: sent chunked (HTTP/1.1) or
			// without content-length (HTTP/2).
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/GetGame", io.NopCloser(strings.NewReader("")))
			req.ContentLength = -1
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Connect-Protocol-Version", "1")
			before := calls.Load()
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var e struct{ Code, Message string }
			_ = json.Unmarshal(b, &e)
			if resp.StatusCode != http.StatusBadRequest || e.Code != "invalid_argument" || calls.Load() != before {
				t.Fatalf("HTTP %d %q, handler ran %v; want 400 invalid_argument before the handler", resp.StatusCode, b, calls.Load() != before)
			}
		})
	}
}
