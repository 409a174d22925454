package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

// A Connect-Timeout-Ms that is not 1 to 10 digits is the client's mistake.
// Per the Connect protocol every error of a unary call is a JSON
// {"code","message"} body (connect-go answers invalid_argument); a bare
// HTTP 400 in text/plain is read by Connect clients from its status
// alone, and 400 reads as internal, a server fault.
func TestAMalformedConnectTimeoutIsAConnectError(t *testing.T) {
	addr, _, calls := startCountingGame(t)
	for _, timeout := range []string{"", "5000", "9999999999"} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/GetGame", bytes.NewReader([]byte(`{"gameId":"g"}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Connect-Protocol-Version", "1")
		req.Header.Set("Connect-Timeout-Ms", timeout)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("Connect-Timeout-Ms %q: HTTP %d %q; want the call served", timeout, resp.StatusCode, b)
		}
	}
	for _, timeout := range []string{"abc", "-1", "1.5", "+5", "12345678901"} {
		t.Run(timeout, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/GetGame", bytes.NewReader([]byte(`{"gameId":"g"}`)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Connect-Protocol-Version", "1")
			req.Header.Set("Connect-Timeout-Ms", timeout)
			before := calls.Load()
			resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var e struct{ Code, Message string }
			jsonErr := json.Unmarshal(b, &e)
			if resp.Header.Get("Content-Type") != "application/json" || jsonErr != nil || e.Code != "invalid_argument" || calls.Load() != before {
				t.Fatalf("Connect-Timeout-Ms %q: HTTP %d %q %q; want a Connect error invalid_argument (application/json) before the handler",
					timeout, resp.StatusCode, resp.Header.Get("Content-Type"), b)
			}
		})
	}
}
