package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"testing"
)

// Server is a redis-server of one test's own, which the test may crash and
// restart: faults that the shared server must never see.
type Server struct {
	Addr string

	bin  string
	argv []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Own starts a redis-server for tb alone on a free loopback port, with an
// append-only file synced on every write, so that a crash loses no write
// Redis acknowledged; args are passed through after those. Without
// redis-server on PATH tb is skipped, or fails under REDISTEST_REQUIRE.
func Own(tb testing.TB, args ...string) *Server {
	tb.Helper()
	s, err := newServer(serverBinary(tb), tb.TempDir(), append([]string{"--appendonly", "yes", "--appendfsync", "always"}, args...)...)
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.kill)
	return s
}

// serverBinary finds redis-server for a test that starts its own servers:
// without one tb is skipped, or fails under REDISTEST_REQUIRE.
func serverBinary(tb testing.TB) string {
	tb.Helper()
	f := DefaultFinder()
	bin, err := f.LookPath("redis-server")
	if err != nil {
		if f.Required() {
			tb.Fatalf("REDISTEST_REQUIRE is set and redis-server is not on PATH: %v", err)
		}
		tb.Skipf("skipping: needs redis-server on PATH: %v", err)
	}
	return bin
}

// newServer prepares a redis-server on a free loopback port keeping its
// files in dir, without persistence unless args (passed after the
// defaults, so they override them) ask for it.
func newServer(bin, dir string, args ...string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return &Server{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		bin:  bin,
		argv: append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--daemonize", "no"}, args...),
	}, nil
}

func (s *Server) start(ctx context.Context) error {
	cmd := exec.Command(s.bin, s.argv...)
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	if err := waitReady(ctx, s.Addr, done); err != nil {
		s.kill()
		return err
	}
	return nil
}

func (s *Server) kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	_ = cmd.Process.Kill()
	<-done
}

// Crash kills the server without warning (SIGKILL) and starts it again on
// the same port and files; it returns once the server answers, its data
// loaded again.
func (s *Server) Crash(ctx context.Context) error {
	s.kill()
	return s.start(ctx)
}
