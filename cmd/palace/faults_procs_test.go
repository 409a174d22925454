package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/redistest"
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
	logs *lockedBuffer
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
	logs := &lockedBuffer{}
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

// stopRedis stops srv as an operator does (SIGTERM) or as a crash does
// (SIGKILL).
func stopRedis(srv *redistest.Server, sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		srv.Kill()
		return
	}
	srv.Stop()
}

// restartRedis starts srv again on its port and files; from the goroutine
// that injects the faults, a failure is reported, not fatal.
func restartRedis(t *testing.T, srv *redistest.Server) {
	if err := srv.Start(context.Background()); err != nil {
		t.Errorf("start redis-server again: %v", err)
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

// wantGamesWhole fails t unless the games load test, played through what,
// exited 0 with nothing lost, doubled, skipped or failed, and did ride a
// failover out; logs are the server's.
func wantGamesWhole(t *testing.T, what string, rep gamesReport, code int, errOut, logs string) {
	t.Helper()
	t.Logf("report %+v", rep)
	if code != exitOK || rep.Lost != 0 || rep.Duplicated != 0 || rep.Gaps != 0 || rep.Errors != 0 {
		t.Fatalf("%s: exit %d, lost %d duplicated %d gaps %d errors %d; want exit 0 and all 0\n%s\nserver logs:\n%s",
			what, code, rep.Lost, rep.Duplicated, rep.Gaps, rep.Errors, tail(errOut, 40), tail(logs, 20))
	}
	if rep.Moves == 0 || rep.Failovers == 0 {
		t.Fatalf("%s: no failover was ridden out: %+v", what, rep)
	}
}

// wantClocksFlagged fails t unless the clocks load test, run through
// what, exited 0 with all its games flagged on time and nothing else
// amiss; it returns the report.
func wantClocksFlagged(t *testing.T, what, out, errOut string, code int, games int64, logs string) clocksReport {
	t.Helper()
	var rep clocksReport
	lastJSON(t, out, &rep)
	t.Logf("report %+v", rep)
	if code != exitOK || rep.Checked != games || rep.Flagged != games || rep.Missed+rep.WronglyFlagged+rep.Inconsistent+rep.Unexpected+rep.Errors != 0 {
		t.Fatalf("%s: exit %d, %+v; want all %d flagged on time, exit 0\n%s\nserver logs:\n%s", what, code, rep, games, tail(errOut, 40), tail(logs, 20))
	}
	return rep
}

// lockedBuffer is what a process writes, read while it still runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
