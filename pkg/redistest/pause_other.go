//go:build !unix

package redistest

import "testing"

// Pause would stop the server's process; without Unix signals the test
// cannot run here.
func (s *Server) Pause(tb testing.TB) { tb.Skip("pausing redis-server needs Unix signals") }

// Resume is Pause's counterpart.
func (s *Server) Resume(tb testing.TB) { tb.Skip("pausing redis-server needs Unix signals") }
