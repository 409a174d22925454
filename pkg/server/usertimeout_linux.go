package server

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout makes the kernel drop c when data it sent stays
// unacknowledged for d. HTTP/2 clients are pinged (KeepaliveTime), but
// an HTTP/1.1 client, such as a browser streaming events over Connect or
// gRPC-Web, is not: without this, a client whose network vanished holds
// its stream, and its seat's presence, until TCP gives up on its own
// after about a quarter of an hour. Heartbeats are data, so such a stream
// ends within d of its first unanswered heartbeat.
func setUserTimeout(c net.Conn, d time.Duration) error {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	}); err != nil {
		return err
	}
	return serr
}
