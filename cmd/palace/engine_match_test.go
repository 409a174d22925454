package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/palacehq/palace/pkg/engine"
)

// cancelOnWrite is a stderr that cancels a context once what was written
// to it contains marker: an interrupt (Ctrl-C, SIGTERM) at that moment.
type cancelOnWrite struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	cancel context.CancelFunc
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.marker) {
		w.cancel()
	}
	return n, err
}

func (w *cancelOnWrite) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestEngineMatchInterruptedExitsNonZero: a match cut short (Ctrl-C,
// SIGTERM, a UCI engine that dies) prints the table of the games played,
// and exits non-zero, so that no script takes it for the whole match.
func TestEngineMatchInterruptedExitsNonZero(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errOut := &cancelOnWrite{marker: "game 1/", cancel: cancel}
	var out bytes.Buffer
	code := run(ctx, []string{"engine", "match", "--a", "level:1", "--b", "level:1", "--games", "40", "--opening-plies", "0", "--variant", "xiangqi"},
		strings.NewReader(""), &out, errOut)
	if code == exitOK {
		t.Fatalf("a match interrupted after its first game exited 0; stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
}

// TestOpeningsOfAWorkerWhenThereAreFewer: RandomOpenings leaves out the
// openings that end the game, so a match may have fewer than its games
// need: every worker's games still get openings, taken again in turn.
func TestOpeningsOfAWorkerWhenThereAreFewer(t *testing.T) {
	ops := []engine.Opening{{Name: "a"}, {Name: "b"}}
	for _, tt := range []struct {
		start, n int
		want     string
	}{
		{0, 4, "a b"},
		{4, 4, "a b"},
		{6, 6, "b a b"},
		{10, 1, "b"},
	} {
		var names []string
		for _, o := range openingsOf(ops, tt.start, tt.n) {
			names = append(names, o.Name)
		}
		if got := strings.Join(names, " "); got != tt.want {
			t.Errorf("openingsOf(2 openings, %d, %d) = %q, want %q", tt.start, tt.n, got, tt.want)
		}
	}
	if got := openingsOf(nil, 4, 4); got != nil {
		t.Errorf("openingsOf(none) = %v, want none (the start position)", got)
	}
}

// TestEngineMatchBadPlayerIsUsageError: a player that is no player exits
// 2, bad usage, before anything runs, not 1 as an engine that crashed.
func TestEngineMatchBadPlayerIsUsageError(t *testing.T) {
	for _, spec := range []string{"level:11", "level:0", "bogus", "uci:", "uci:/bin/engine,Threads"} {
		out, errOut, code := palace("engine", "match", "--a", spec, "--games", "2", "--opening-plies", "0")
		if code != exitUsage {
			t.Errorf("palace engine match --a %s: exit %d, stdout %q, stderr %q; want exit 2 (bad usage)", spec, code, out, strings.TrimSpace(errOut))
		}
	}
}
