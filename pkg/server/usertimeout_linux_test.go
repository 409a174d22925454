package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Every connection the splitter hands on, HTTP/1.1 ones included, has its
// TCP user timeout set, so a browser whose network vanished mid-stream is
// dropped instead of held for TCP's own quarter of an hour.
func TestConnectionsGetTheUserTimeout(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sp := &splitter{lis: lis, grpc: newConnListener(lis.Addr()), http: newConnListener(lis.Addr()),
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), sniffTime: time.Second, userTimeout: 7 * time.Second}
	go func() { _ = sp.serve(context.Background()) }()
	defer lis.Close()
	cl, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Write([]byte("POST /palace.game.v1.GameService/StreamEvents HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	c, err := sp.http.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(*replayConn).Conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		got, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	}); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	if got != 7000 {
		t.Fatalf("TCP user timeout %d ms, want 7000", got)
	}
}
