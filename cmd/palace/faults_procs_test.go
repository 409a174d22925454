package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/app"
)

// The fault tests kill real processes (SIGKILL), which an
// in-process palace serve cannot be: the test binary runs itself as
// `palace <args>` when childRunsPalaceEnv is set, before TestMain, the real
// main's way (its signal context included).
const childRunsPalaceEnv = "PALACE_TEST_CHILD_RUNS_PALACE"

func init() {
	if os.Getenv(childRunsPalaceEnv) != "1" {
		return
	}
	ctx, stop := app.SignalContext()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// servedProc is a palace serve of the test's own in a process of its own,
// on a fixed loopback port, which the test may kill and start again.
type servedProc struct {
	t    *testing.T
	Addr string
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logs *bytes.Buffer
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startServeProc starts `palace serve` in a process of its own; it returns
// once the server answers its health check.
func startServeProc(t *testing.T, extra ...string) *servedProc {
	t.Helper()
	addr := freeLoopbackAddr(t)
	p := &servedProc{t: t, Addr: addr, args: append([]string{"serve", "--listen", addr, "--log-level", "warn"}, extra...)}
	p.Start()
	t.Cleanup(func() { p.Signal(syscall.SIGKILL) })
	return p
}

// Start starts the process (again), on the same port and flags.
func (p *servedProc) Start() {
	p.t.Helper()
	cmd := exec.Command(os.Args[0], p.args...)
	cmd.Env = append(os.Environ(), childRunsPalaceEnv+"=1")
	logs := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done, p.logs = cmd, done, logs
	p.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			p.t.Fatalf("palace serve on %s exited at start: %s", p.Addr, logs.String())
		default:
		}
		_, _, code := palace("health", "--addr", p.Addr, "--timeout", "1s")
		if code == exitOK {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("palace serve on %s did not serve within 60s: %s", p.Addr, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Signal sends sig to the process and waits for it to end (for good after
// SIGKILL; SIGTERM is a graceful stop, waited for up to 30 s).
func (p *servedProc) Signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Logs is what the process (its last start) wrote.
func (p *servedProc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// ownRedis is a redis-server of the test's own with an append-only
// file synced on every write, which the test may stop with any signal and
// start again on the same port and files.
type ownRedis struct {
	t    *testing.T
	Addr string
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func startOwnRedis(t *testing.T) *ownRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server")
	}
	addr := freeLoopbackAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	r := &ownRedis{t: t, Addr: addr, args: []string{bin, "--port", port, "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "yes", "--appendfsync", "always", "--dir", t.TempDir(), "--daemonize", "no"}}
	r.Start()
	t.Cleanup(func() { r.Signal(syscall.SIGKILL) })
	return r
}

func (r *ownRedis) Start() {
	r.t.Helper()
	cmd := exec.Command(r.args[0], r.args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	r.mu.Lock()
	r.cmd, r.done = cmd, done
	r.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", r.Addr, time.Second)
		if err == nil {
			// PING until it answers PONG (not LOADING).
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte("PING\r\n"))
			buf := make([]byte, 64)
			n, _ := c.Read(buf)
			c.Close()
			if string(buf[:n]) == "+PONG\r\n" {
				return
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("redis-server on %s did not answer within 30s", r.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *ownRedis) Signal(sig syscall.Signal) {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// playGamesUnderFaults runs the games load test and returns its report.
func playGamesUnderFaults(t *testing.T, after time.Duration, faults func(), args ...string) (gamesReport, string, int) {
	t.Helper()
	out, errOut, code := palaceUnderFaults(after, faults, append([]string{"loadtest", "games", "--floor=false"}, args...)...)
	var rep gamesReport
	lastJSON(t, out, &rep)
	return rep, errOut, code
}
