package server

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"
)

const reflectPath = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"

func listServicesFrame(t *testing.T) []byte {
	t.Helper()
	msg, err := proto.Marshal(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}})
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
}

func h2cClient() *http.Client {
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &h2c}, Timeout: 10 * time.Second}
}

// TestAReflectionCallCutInItsFirstFrameIsInvalidArgument: a reflection
// call whose body ends inside its first frame is the client's fault; once
// Connect reflection calls skipped the whole-body checks, grpc-go
// answered it Internal ("unexpected EOF"), a server fault.
func TestAReflectionCallCutInItsFirstFrameIsInvalidArgument(t *testing.T) {
	addr, _ := startServerWith(t, Config{BodyTimeout: 2 * time.Second})
	framed := listServicesFrame(t)
	for _, tc := range []struct{ ct string }{
		{"application/connect+proto"},
		{"application/grpc-web+proto"},
	} {
		for _, body := range [][]byte{framed[:len(framed)-1], framed[:3], nil} {
			req, err := http.NewRequest(http.MethodPost, "http://"+addr+reflectPath, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", tc.ct)
			resp, err := h2cClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			all, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got := resp.Header.Get("Grpc-Status") + resp.Trailer.Get("Grpc-Status")
			text := string(all)
			if !strings.Contains(text, `"invalid_argument"`) && got != "3" {
				t.Errorf("%s: a body of %d bytes, cut inside its first frame: grpc-status %q, %q; want InvalidArgument (the client's fault)", tc.ct, len(body), got, text)
			}
		}
	}
}

// TestAConnectReflectionCallOverHTTP1IsBounded: a Connect reflection
// stream over HTTP/1.1 whose body stays open was let run with the read
// deadline lifted, and net/http, which reads the rest of an HTTP/1.1 body
// before it answers, held the connection and the handler for ever. It is
// read whole there, within the body timeout.
func TestAConnectReflectionCallOverHTTP1IsBounded(t *testing.T) {
	const timeout = 500 * time.Millisecond
	addr, _ := startServerWith(t, Config{BodyTimeout: timeout})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(8 * time.Second))
	framed := listServicesFrame(t)
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/connect+proto\r\nTransfer-Encoding: chunked\r\n\r\n", reflectPath, addr)
	fmt.Fprintf(conn, "%x\r\n%s\r\n", len(framed), framed)
	// The body stays open: a second message may come.
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer within 8 s to a Connect reflection call over HTTP/1.1 whose first message came at once (body timeout %v): %v", timeout, err)
	}
	end, _ := io.ReadAll(resp.Body)
	if took := time.Since(start); took > 3*time.Second || !strings.Contains(string(end), "deadline_exceeded") {
		t.Fatalf("a Connect reflection call over HTTP/1.1 whose body stays open: HTTP %d %q after %v, want deadline_exceeded after the body timeout of %v", resp.StatusCode, end, took.Round(time.Millisecond), timeout)
	}
}

// TestAnOversizedFirstMessageIsRefusedAtOnce: a Connect reflection call
// whose first frame declared more than any accepted message, then
// trickled, had the read deadline lifted; in JSON the transcoder reserved
// the size declared and read it for as long as the client liked.
func TestAnOversizedFirstMessageIsRefusedAtOnce(t *testing.T) {
	const timeout = 300 * time.Millisecond
	addr, _ := startServerWith(t, Config{BodyTimeout: timeout, MaxRecvBytes: 1024})
	for _, ct := range []string{"application/connect+proto", "application/connect+json"} {
		pr, pw := io.Pipe()
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+reflectPath, pr)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", ct)
		go func() {
			_, _ = pw.Write(binary.BigEndian.AppendUint32([]byte{0}, 1<<20))
			for i := 0; i < 80; i++ {
				if _, err := pw.Write([]byte{'x'}); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			pw.Close()
		}()
		start := time.Now()
		resp, err := h2cClient().Do(req)
		if err != nil {
			t.Fatalf("%s: %v after %v", ct, err, time.Since(start))
		}
		all, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		pw.CloseWithError(io.ErrClosedPipe)
		took := time.Since(start)
		if took > 3*time.Second || !strings.Contains(string(all), "resource_exhausted") {
			t.Errorf("%s: a first frame declared over the limit, trickled: HTTP %d %q after %v (body timeout %v), want resource_exhausted at once", ct, resp.StatusCode, all, took.Round(time.Millisecond), timeout)
		}
	}
}

// frameOf frames msg with flags, as a Connect stream or gRPC-Web body.
func frameOf(flags byte, msg []byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{flags}, uint32(len(msg))), msg...)
}

// TestACompressedFrameWithoutEncodingIsInvalidArgument: a Connect stream
// or gRPC-Web request whose frame is flagged compressed while the call
// names no encoding is the client's fault; the frame's flags were not
// checked, and grpc-go answered Internal ("compressed flag set with
// identity or empty encoding"), a server fault, on every stream path.
func TestACompressedFrameWithoutEncodingIsInvalidArgument(t *testing.T) {
	addr, _ := startServerWith(t, Config{BodyTimeout: 2 * time.Second})
	msg, err := proto.Marshal(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}})
	if err != nil {
		t.Fatal(err)
	}
	body := frameOf(1, gzipped(t, msg))
	for _, c := range []struct{ path, ct string }{
		{reflectPath, "application/connect+proto"},
		{"/grpc.health.v1.Health/Watch", "application/connect+proto"},
		{"/grpc.health.v1.Health/Check", "application/grpc-web+proto"},
		{"/grpc.health.v1.Health/Watch", "application/grpc-web+proto"},
	} {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+c.path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", c.ct)
		resp, err := h2cClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		all, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		status := resp.Header.Get("Grpc-Status") + resp.Trailer.Get("Grpc-Status")
		if !strings.Contains(string(all), `"invalid_argument"`) && status != "3" {
			t.Errorf("%s %s: a frame flagged compressed with no encoding named: HTTP %d grpc-status %q %q; want InvalidArgument (the client's fault)",
				c.ct, c.path, resp.StatusCode, status, all)
		}
	}
}

// TestAConnectReflectionCallOverHTTP1IsNotCalledMalformed: over HTTP/1.1
// a Connect reflection call of one message is answered 505 "bidi streams
// require HTTP/2" by the transcoder; one of two messages (a body a bidi
// method may have) was refused as malformed, "a request holds one
// message".
func TestAConnectReflectionCallOverHTTP1IsNotCalledMalformed(t *testing.T) {
	addr, _ := startServerWith(t, Config{BodyTimeout: 2 * time.Second})
	msg, err := proto.Marshal(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}})
	if err != nil {
		t.Fatal(err)
	}
	answer := func(body []byte) (int, string) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(6 * time.Second))
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/connect+proto\r\nContent-Length: %d\r\n\r\n%s", reflectPath, addr, len(body), body)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		all, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(all)
	}
	one := frameOf(0, msg)
	c1, b1 := answer(one)
	c2, b2 := answer(append(append([]byte{}, one...), one...))
	if c1 != c2 || strings.Contains(b2, "invalid_argument") {
		t.Fatalf("HTTP/1.1 Connect reflection: one message: HTTP %d %q; two messages: HTTP %d %q; want the same refusal (HTTP/2 needed), not a malformed request", c1, b1, c2, b2)
	}
}
