// Package redistest gives tests a real Redis server. It looks, in order,
// for REDIS_ADDR, a Redis container through testcontainers when a Docker
// daemon answers, and a redis-server binary on PATH started on a free
// port. When none is available the test is skipped with a message saying
// how to get Redis, or fails when REDISTEST_REQUIRE=1 (as in CI), so a
// missing server can never pass for a green run.
//
// Tests share the server: each must isolate itself with its own keys
// (Prefix, or ids of its own) and never flush a server it did not start.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// ErrNoRedis means no way to get a Redis server was found.
var ErrNoRedis = errors.New("no Redis available: set REDIS_ADDR=host:port, start a Docker daemon, or install redis-server (apt-get install -y redis-server)")

// Source says where a server came from.
type Source string

const (
	FromEnv       Source = "REDIS_ADDR"
	FromContainer Source = "testcontainers"
	FromBinary    Source = "redis-server"
)

// Instance is a reachable Redis server.
type Instance struct {
	Addr   string
	Source Source
	// stop ends a server this package started; nil for REDIS_ADDR.
	stop func() error
}

// Stop ends a server this package started; it does nothing for REDIS_ADDR.
func (i *Instance) Stop() error {
	if i.stop == nil {
		return nil
	}
	return i.stop()
}

// Finder holds the lookups Find uses, so each branch can be tested.
type Finder struct {
	Getenv   func(string) string
	LookPath func(string) (string, error)
	// DockerUp reports whether a Docker daemon answers.
	DockerUp func(context.Context) bool
}

// DefaultFinder looks at the real environment.
func DefaultFinder() Finder {
	return Finder{Getenv: os.Getenv, LookPath: exec.LookPath, DockerUp: dockerUp}
}

// Find returns a server by the first branch that works, or ErrNoRedis.
func (f Finder) Find(ctx context.Context) (*Instance, error) {
	if addr := strings.TrimSpace(f.Getenv("REDIS_ADDR")); addr != "" {
		return &Instance{Addr: addr, Source: FromEnv}, nil
	}
	var errs []error
	if f.DockerUp(ctx) {
		inst, err := startContainer(ctx)
		if err == nil {
			return inst, nil
		}
		errs = append(errs, err)
	}
	if bin, err := f.LookPath("redis-server"); err == nil {
		inst, err := StartBinary(ctx, bin)
		if err == nil {
			return inst, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(append([]error{ErrNoRedis}, errs...)...)
}

// Required reports whether REDISTEST_REQUIRE asks to fail instead of skip.
func (f Finder) Required() bool {
	v, _ := strconv.ParseBool(f.Getenv("REDISTEST_REQUIRE"))
	return v
}

func dockerUp(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return false
	}
	_ = cli.Close()
	return true
}

func startContainer(ctx context.Context) (*Instance, error) {
	c, err := testcontainers.Run(ctx, "redis:7-alpine",
		testcontainers.WithExposedPorts("6379/tcp"),
		testcontainers.WithWaitStrategy(wait.ForListeningPort("6379/tcp")),
	)
	if err != nil {
		return nil, fmt.Errorf("redis container: %w", err)
	}
	ep, err := c.PortEndpoint(ctx, "6379/tcp", "")
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return nil, fmt.Errorf("redis container endpoint: %w", err)
	}
	return &Instance{Addr: ep, Source: FromContainer, stop: func() error { return testcontainers.TerminateContainer(c) }}, nil
}

// StartBinary starts redis-server on a free loopback port without
// persistence and waits until it answers. Extra args are passed through
// (e.g. "--cluster-enabled", "yes").
func StartBinary(ctx context.Context, bin string, args ...string) (*Instance, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redis-server dir: %w", err)
	}
	srv, err := newServer(bin, dir, args...)
	if err == nil {
		err = srv.start(ctx)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	stop := func() error {
		srv.kill()
		return os.RemoveAll(dir)
	}
	return &Instance{Addr: srv.Addr, Source: FromBinary, stop: stop}, nil
}

// waitReady waits until the server at addr answers PING (which it does
// only once its data is loaded), or exits (done closes), or 10s pass.
func waitReady(ctx context.Context, addr string, done <-chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := c.Ping(ctx).Err(); err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server on %s exited at start", addr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer within 10s", addr)
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// shared is the one server of this test binary: starting a server per
// test would cost more than the tests themselves.
var shared struct {
	once sync.Once
	inst *Instance
	err  error
}

// Addr returns the address of a real Redis server for tb, skipping or
// failing tb (see the package doc) when there is none.
func Addr(tb testing.TB) string {
	tb.Helper()
	f := DefaultFinder()
	shared.once.Do(func() {
		shared.inst, shared.err = f.Find(context.Background())
	})
	if shared.err != nil {
		if f.Required() {
			tb.Fatalf("REDISTEST_REQUIRE is set: %v", shared.err)
		}
		tb.Skipf("skipping: %v", shared.err)
	}
	return shared.inst.Addr
}

// Client returns a client of the shared server, closed when tb ends.
func Client(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	c := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{Addr(tb)}})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Prefix returns a key prefix unique to this test run, so parallel tests
// sharing one server never see each other's keys.
func Prefix(tb testing.TB) string {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "test:" + hex.EncodeToString(b[:]) + ":"
}
