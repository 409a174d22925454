package server

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// A gRPC-Web body that is not one whole message (none, a cut one, or
// bytes after it) is the client's fault: grpc-go would answer Internal.
// Binary and text mode alike get InvalidArgument before the handler runs,
// and whole messages are served.
func TestCutGRPCWebFramesAreInvalidArgument(t *testing.T) {
	addr, _, calls := startCountingGame(t)
	msg := getGameWithID("g")
	framed := append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...)
	for name, body := range map[string][]byte{
		"empty":              {},
		"inside the header":  {0},
		"inside the message": framed[:len(framed)-2],
		// grpc-go answered these Internal ("cardinality violation",
		// "unexpected EOF").
		"a second message":   append(append([]byte(nil), framed...), framed...),
		"a cut second frame": append(append([]byte(nil), framed...), 0, 0),
	} {
		for _, ct := range []string{grpcWebBinary + "+proto", grpcWebText} {
			t.Run(name+" "+ct, func(t *testing.T) {
				before := calls.Load()
				st, m := grpcWebCall(t, addr, ct, body)
				if st != "3" || !strings.Contains(m, "malformed request") || calls.Load() > before {
					t.Fatalf("grpc-status %s %q, handler ran %v; want 3 naming a malformed request before the handler", st, m, calls.Load() > before)
				}
			})
		}
	}
	for name, body := range map[string][]byte{
		"a message":    framed,
		"an empty one": {0, 0, 0, 0, 0},
	} {
		for _, ct := range []string{grpcWebBinary, grpcWebText} {
			t.Run(name+" "+ct, func(t *testing.T) {
				before := calls.Load()
				if st, m := grpcWebCall(t, addr, ct, body); calls.Load() == before {
					t.Fatalf("grpc-status %s %q: the handler did not run", st, m)
				}
			})
		}
	}
}

// grpcWebCall calls GetGame over gRPC-Web and returns its grpc-status and
// message, from the headers of a trailers-only answer or from the
// trailer frame.
func grpcWebCall(t *testing.T, addr, contentType string, body []byte) (st, msg string) {
	t.Helper()
	return grpcWebCallOf(t, addr, "/palace.game.v1.GameService/GetGame", contentType, body)
}

// grpcWebCallOf is grpcWebCall of the method at path.
func grpcWebCallOf(t *testing.T, addr, path, contentType string, body []byte) (st, msg string) {
	t.Helper()
	if contentType == grpcWebText {
		body = []byte(base64.StdEncoding.EncodeToString(body))
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if st := resp.Header.Get("Grpc-Status"); st != "" {
		m, _ := url.PathUnescape(resp.Header.Get("Grpc-Message"))
		return st, m
	}
	if contentType == grpcWebText {
		b, _ = base64.StdEncoding.DecodeString(string(b))
	}
	for line := range strings.SplitSeq(string(b), "\r\n") {
		if v, ok := strings.CutPrefix(strings.ToLower(line), "grpc-status:"); ok {
			st = strings.TrimSpace(v)
		}
	}
	return st, ""
}

// A body of one small message followed by more bytes than a request may
// hold was read only up to that bound and then passed on unchecked, so
// grpc-go answered Internal ("cardinality violation") where the same
// trailing bytes, fewer, were InvalidArgument.
func TestTrailingBytesPastTheReadLimitAreInvalidArgument(t *testing.T) {
	addr, _, calls := startCountingGame(t)
	msg := getGameWithID("g")
	framed := append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...)
	// Past the default MaxRecvBytes, 1 MiB, in whole frames.
	body := bytes.Repeat(framed, (1<<20)/len(framed)+2)
	before := calls.Load()
	if st, m := grpcWebCall(t, addr, grpcWebBinary+"+proto", body); st != "3" || calls.Load() > before {
		t.Fatalf("grpc-status %q %q, handler ran %v; want 3 (INVALID_ARGUMENT) before the handler", st, m, calls.Load() > before)
	}
}
