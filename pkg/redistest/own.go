package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
	bin, dir := serverBinary(tb), tb.TempDir()
	s, err := startOnFreePorts(context.Background(), func() (*Server, error) {
		return newServer(bin, dir, append([]string{"--appendonly", "yes", "--appendfsync", "always"}, args...)...)
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.kill)
	return s
}

// OwnWithPassword is Own with a server that asks for pw: of the default
// user (redis://:pw@addr) and of an ACL user palace (redis://palace:pw@addr).
// Its Client has no password, so it is refused.
func OwnWithPassword(tb testing.TB, pw string) *Server {
	tb.Helper()
	s := Own(tb)
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	ctx := context.Background()
	if err := c.Do(ctx, "ACL", "SETUSER", "palace", "on", ">"+pw, "~*", "&*", "+@all").Err(); err != nil {
		tb.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "requirepass", pw).Err(); err != nil {
		tb.Fatal(err)
	}
	return s
}

// startOnFreePorts makes a server with build and starts it, making it again
// on new ports when the server exits at start: a port chosen free can be
// taken before the server binds it, by another test's server.
func startOnFreePorts(ctx context.Context, build func() (*Server, error)) (*Server, error) {
	var err error
	for range 5 {
		var s *Server
		if s, err = build(); err != nil {
			return nil, err
		}
		if err = s.start(ctx); err == nil {
			return s, nil
		}
	}
	return nil, err
}

// Replica starts a redis-server for tb alone that replicates the server
// at master (a Proxy's address, to cut the link between them), and returns
// once it has master's data and follows its writes. Promote it with
// REPLICAOF NO ONE, as a failover would.
func Replica(tb testing.TB, master string, args ...string) *Server {
	tb.Helper()
	host, port, err := net.SplitHostPort(master)
	if err != nil {
		tb.Fatalf("replica of %q: %v", master, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A master waits 5 s by default before a diskless synchronisation, in
	// case more replicas come; a test has no more coming.
	m := redis.NewClient(&redis.Options{Addr: master})
	err = m.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err()
	_ = m.Close()
	if err != nil {
		tb.Fatalf("master %s: %v", master, err)
	}
	s := Own(tb, append([]string{"--replicaof", host, port}, args...)...)
	if err := waitFollowing(ctx, master, s.Addr); err != nil {
		tb.Fatal(err)
	}
	return s
}

// waitFollowing waits until the master at addr has a replica confirm a
// write of its own. A replica reports its link up, and its master counts
// it online, up to a second before the master streams writes to it,
// which is what WAIT needs. A cluster master takes only keys of its own
// slots, so the key is tried with a counter until one is its.
func waitFollowing(ctx context.Context, addr, replica string) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	conn := c.Conn()
	defer conn.Close()
	for i := 0; ; i++ {
		err := conn.Set(ctx, "redistest:following:"+replica+":"+strconv.Itoa(i), 1, time.Minute).Err()
		if err == nil {
			break
		}
		if !strings.HasPrefix(err.Error(), "MOVED") {
			return fmt.Errorf("master %s: %w", addr, err)
		}
	}
	timeout := 10 * time.Second
	if n, err := conn.Wait(ctx, 1, timeout).Result(); err != nil || n < 1 {
		return fmt.Errorf("replica %s did not confirm a write of master %s within %v: %d replicas, %v", replica, addr, timeout, n, err)
	}
	return nil
}

// Pair is a master and its replica, linked through a Proxy so that a test
// can hold the replica back (Link.Blackhole: it stays connected and
// acknowledges what it has, as a lagging replica does) or cut it off.
type Pair struct {
	Master, Replica *Server
	Link            *Proxy
}

// NewPair starts a master and a replica of it for tb alone.
func NewPair(tb testing.TB) Pair {
	tb.Helper()
	p := Pair{Master: Own(tb)}
	p.Link = NewProxy(tb, p.Master.Addr)
	p.Replica = Replica(tb, p.Link.Addr())
	return p
}

// Client returns a client of the server, closed when tb ends.
func (s *Server) Client(tb testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill stops the server without warning (SIGKILL), for good.
func (s *Server) Kill() { s.kill() }

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
	_ = cmd.Process.Kill() // an error: it is gone already (Kill, then cleanup)
	<-done
}

// Stop stops the server as an operator does (SIGTERM: it writes what it
// holds and exits), for Start to start it again.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-done
}

// Start starts a server that Kill or Stop stopped again, on the same port
// and files, and returns once it answers.
func (s *Server) Start(ctx context.Context) error { return s.start(ctx) }

// Crash kills the server without warning (SIGKILL) and starts it again on
// the same port and files; it returns once the server answers, its data
// loaded again.
func (s *Server) Crash(ctx context.Context) error { return s.CrashFor(ctx, 0) }

// CrashFor is Crash with the server down for d before it starts again,
// long enough for its clients to try, and fail, to reconnect.
func (s *Server) CrashFor(ctx context.Context, d time.Duration) error {
	s.kill()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
	}
	return s.start(ctx)
}
