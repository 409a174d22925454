package server

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"
)

// JSON is UTF-8 whatever its Content-Type says, and clients spell the
// charset as they like: axios before 1.0 sends
// "application/json;charset=utf-8", Java's clients write UTF-8. Connect's
// own servers take every spelling of charset=utf-8; the transcoder took
// only "application/json; charset=utf-8", and answered the others 415,
// "sub-format not supported", in plain text that Connect clients do not
// show.
func TestJSONCharsetSpellingsAreServed(t *testing.T) {
	addr, _, calls := startCountingGame(t)
	for _, ct := range []string{
		"application/json; charset=utf-8",
		"application/json;charset=utf-8",
		"application/json; charset=UTF-8",
		`application/json; charset="utf-8"`,
		"application/json ; Charset=Utf-8",
	} {
		before := calls.Load()
		if code, msg := connectCall(t, addr, ct, []byte(`{"gameId":"g"}`)); code != "" || calls.Load() == before {
			t.Errorf("Content-Type %q: %s %q; want the call served", ct, code, msg)
		}
	}
	// A stream's request: countingGame does not stream, so a request that
	// reaches it ends Unimplemented in a Connect end frame, not 415.
	for _, ct := range []string{"application/connect+json", "application/connect+json; charset=utf-8", "application/connect+json;charset=UTF-8"} {
		body := append([]byte{0, 0, 0, 0, 14}, `{"gameId":"g"}`...)
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/StreamEvents", bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte("unimplemented")) {
			t.Errorf("stream with Content-Type %q: HTTP %d %q; want its end frame saying unimplemented", ct, resp.StatusCode, b)
		}
	}
	// Another charset is not JSON's: still refused.
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/GetGame", bytes.NewReader([]byte(`{"gameId":"g"}`)))
	req.Header.Set("Content-Type", "application/json; charset=utf-16")
	req.Header.Set("Connect-Protocol-Version", "1")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("charset=utf-16: HTTP %d, want 415", resp.StatusCode)
	}
}

// A browser's fetch with a string body and no Content-Type sends
// text/plain. That is no protocol's, and was answered 404 "Not Found",
// which reads as a wrong method path; it is 415 now, naming what is served.
func TestUnknownMediaTypeIsUnsupported(t *testing.T) {
	addr, _, calls := startCountingGame(t)
	for _, ct := range []string{"text/plain;charset=UTF-8", "", "application/x-www-form-urlencoded", "application/xml"} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/GetGame", bytes.NewReader([]byte(`{"gameId":"g"}`)))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		req.Header.Set("Connect-Protocol-Version", "1")
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType || !bytes.Contains(b, []byte("application/json")) || resp.Header.Get("Accept-Post") == "" {
			t.Errorf("Content-Type %q: HTTP %d %q, Accept-Post %q; want 415 naming application/json", ct, resp.StatusCode, b, resp.Header.Get("Accept-Post"))
		}
	}
	if calls.Load() != 0 {
		t.Errorf("%d calls reached the handler", calls.Load())
	}
	if code, msg := connectCall(t, addr, "application/json", []byte(`{"gameId":"g"}`)); code != "" {
		t.Fatalf("JSON: %s %q", code, msg)
	}
	if code, msg := connectCall(t, addr, "application/proto", getGameWithID("g")); code != "" {
		t.Fatalf("proto: %s %q", code, msg)
	}
}
