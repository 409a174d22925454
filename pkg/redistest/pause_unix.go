//go:build unix

package redistest

import (
	"syscall"
	"testing"
)

// Pause stops the server's process (SIGSTOP), as a stalled machine would:
// it keeps its connections and answers nothing until Resume.
func (s *Server) Pause(tb testing.TB) { s.signal(tb, syscall.SIGSTOP) }

// Resume lets a paused server go on (SIGCONT).
func (s *Server) Resume(tb testing.TB) { s.signal(tb, syscall.SIGCONT) }

func (s *Server) signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("redis-server on %s: %v: %v", s.Addr, sig, err)
	}
}
