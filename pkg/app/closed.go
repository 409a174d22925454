package app

import (
	"errors"
	"net"
)

// isClosed tells a listener that the HTTP server already closed apart
// from a real failure.
func isClosed(err error) bool { return errors.Is(err, net.ErrClosed) }
