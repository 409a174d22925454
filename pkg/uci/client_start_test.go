package uci

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// readers lists the goroutines NewClient started (those reading an
// engine's output).
func readers() []string {
	buf := make([]byte, 1<<20)
	var out []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "created by github.com/palacehq/palace/pkg/uci.NewClient ") {
			out = append(out, g)
		}
	}
	return out
}

// waitReaders waits up to d for the goroutines NewClient started to be
// no more than n, and returns those left.
func waitReaders(n int, d time.Duration) []string {
	var left []string
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if left = readers(); len(left) <= n || time.Now().After(deadline) {
			return left
		}
	}
}

// TestFailedStartLeavesNoReader: Start of a binary that is no UCI engine
// and floods its output fails (the handshake times out with its context)
// and leaves nothing behind: the process is killed, and the goroutine
// reading its output ends too, though far more lines than it buffers
// came after the handshake gave up.
func TestFailedStartLeavesNoReader(t *testing.T) {
	yes, err := exec.LookPath("yes")
	if err != nil {
		t.Skip("no yes binary")
	}
	before := len(readers())
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	c, err := Start(ctx, yes)
	if err == nil {
		_ = c.Close()
		t.Fatal("Start of yes succeeded")
	}
	if c != nil {
		t.Errorf("Start failed (%v) but returned a Client", err)
	}
	if left := waitReaders(before, 3*time.Second); len(left) > before {
		t.Fatalf("after Start failed (%v), %d output readers remain (%d before):\n%s", err, len(left), before, strings.Join(left, "\n\n"))
	}
}

// TestStartReturnsWhenContextEnds: Start of a binary that never answers
// (nor reads its input) returns its context's error as soon as that
// context ends: the engine, of no use, is killed at once rather than
// given time to quit.
func TestStartReturnsWhenContextEnds(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	c, err := Start(ctx, sleep, "30")
	el := time.Since(start)
	if err == nil {
		_ = c.Close()
		t.Fatal("Start of sleep succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Start of sleep: %v; want its context's error", err)
	}
	if el > time.Second {
		t.Fatalf("Start returned %v after it was called with a 200ms deadline (err %v)", el.Round(time.Millisecond), err)
	}
}

// TestFailedHandshakeReturnsNoClient: when the engine does not get ready
// in time, NewClient returns its error and no Client. The goroutine
// reading the engine's output ends once that output does, though the
// engine printed more lines than it buffers after NewClient gave up.
func TestFailedHandshakeReturnsNoClient(t *testing.T) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	defer inW.Close()
	engineDone := make(chan struct{})
	go func() {
		// uciok, then isready answered too late, with a flood of lines
		// and no readyok; then the engine's output ends.
		defer close(engineDone)
		defer outW.Close()
		defer inR.Close()
		sc := bufio.NewScanner(inR)
		for sc.Scan() && sc.Text() != "isready" {
			if sc.Text() == "uci" {
				fmt.Fprintln(outW, "id name late\nuciok")
			}
		}
		time.Sleep(300 * time.Millisecond)
		for i := range 1000 {
			fmt.Fprintf(outW, "info string busy %d\n", i)
		}
	}()
	before := len(readers())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	c, err := NewClient(ctx, outR, inW, nil)
	if !errors.Is(err, context.DeadlineExceeded) || c != nil {
		t.Errorf("NewClient = %p, %v; want no Client and its context's error", c, err)
	}
	select {
	case <-engineDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the fake engine could not print its lines")
	}
	if left := waitReaders(before, 3*time.Second); len(left) > before {
		t.Fatalf("after NewClient failed (%v) and the engine's output ended, %d output readers remain (%d before):\n%s", err, len(left), before, strings.Join(left, "\n\n"))
	}
}
