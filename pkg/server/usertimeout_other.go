//go:build !linux

package server

import (
	"net"
	"time"
)

// setUserTimeout does nothing here: TCP_USER_TIMEOUT is a Linux option.
func setUserTimeout(net.Conn, time.Duration) error { return nil }
