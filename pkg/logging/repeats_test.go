package logging

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestQuietRepeats: identical warnings within the window are written
// once, the next after it with their count; other warnings, other
// components' and every info record are written.
func TestQuietRepeats(t *testing.T) {
	var out bytes.Buffer
	h := QuietRepeats(slog.NewTextHandler(&out, nil)).(repeatHandler)
	now := time.Unix(1_700_000_000, 0)
	h.seen.now = func() time.Time { return now }
	log := slog.New(h)
	down := errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	for i := range 5 {
		log.Warn("rpc", "method", "/g/MakeMove", "code", "Unavailable", "duration_ms", i)
		log.Warn("redis client", "err", down)
		log.With("component", "clock").Warn("redis client", "err", down)
		log.Info("served", "n", 1)
	}
	log.Warn("redis client", "err", errors.New("another error"))
	lines := func(sub string) int { return strings.Count(out.String(), sub) }
	if n := lines("msg=rpc"); n != 1 {
		t.Errorf("%d lines of one warning repeated (its durations aside), want 1:\n%s", n, out.String())
	}
	if n := lines(`msg="redis client"`); n != 3 {
		t.Errorf("%d redis client warnings, want one each of two components and one of another error:\n%s", n, out.String())
	}
	if n := lines("msg=served"); n != 5 {
		t.Errorf("%d info records of 5 written", n)
	}
	now = now.Add(repeatWindow)
	out.Reset()
	log.Warn("rpc", "method", "/g/MakeMove", "code", "Unavailable", "duration_ms", 9)
	if !strings.Contains(out.String(), "repeated=4") {
		t.Errorf("the warning after the window: %q, want repeated=4", out.String())
	}
	out.Reset()
	log.Warn("rpc", "method", "/g/MakeMove", "code", "Unavailable")
	if out.Len() != 0 {
		t.Errorf("the warning again within the new window was written: %q", out.String())
	}
}

// TestManyDistinctWarningsStayCheap: thousands of distinct warnings in a
// window (each its own line) must not make each warning scan every warning
// of the window, under the lock all of them take: 20,000 took seconds. A
// scan (a sweep of the keys past) comes at most once a window.
func TestManyDistinctWarningsStayCheap(t *testing.T) {
	h := QuietRepeats(slog.NewTextHandler(io.Discard, nil)).(repeatHandler)
	now := time.Unix(1_700_000_000, 0)
	h.seen.now = func() time.Time { return now }
	log := slog.New(h)
	sweeps, swept := 0, h.seen.swept
	for i := range 20_000 {
		log.Warn("a warning of its own", "n", strconv.Itoa(i), "err", "unavailable")
		now = now.Add(100 * time.Microsecond)
		if h.seen.swept != swept {
			sweeps, swept = sweeps+1, h.seen.swept
		}
	}
	if sweeps > 1 {
		t.Fatalf("20,000 distinct warnings within %v scanned the keys of the window %d times, want at most once", repeatWindow, sweeps)
	}
	// Keys of records long past are still dropped.
	now = now.Add(repeatWindow)
	log.Warn("after the window")
	h.seen.mu.Lock()
	defer h.seen.mu.Unlock()
	if n := len(h.seen.last); n > 2048 {
		t.Fatalf("%d keys kept after the window; want the past ones dropped", n)
	}
}

// TestASweepKeepsTheWindowsWarnings: dropping the keys of records long
// past keeps those of the window, so a warning logged just before a sweep
// is still counted, not written again, when it repeats.
func TestASweepKeepsTheWindowsWarnings(t *testing.T) {
	var out bytes.Buffer
	h := QuietRepeats(slog.NewTextHandler(&out, nil)).(repeatHandler)
	now := time.Unix(1_700_000_000, 0)
	h.seen.now = func() time.Time { return now }
	log := slog.New(h)
	for i := range 1100 {
		log.Warn("a warning of its own", "n", strconv.Itoa(i))
	}
	now = now.Add(repeatWindow - time.Second)
	log.Warn("recent")
	// The first warnings are past their window now, and swept.
	now = now.Add(2 * time.Second)
	log.Warn("another")
	out.Reset()
	log.Warn("recent")
	if out.Len() > 0 {
		t.Fatalf("a warning of the window was written again after a sweep: %q", out.String())
	}
	h.seen.mu.Lock()
	defer h.seen.mu.Unlock()
	if n := len(h.seen.last); n != 2 {
		t.Fatalf("%d keys kept after the sweep, want the 2 of the window", n)
	}
}

// TestOneCauseForManyGamesIsOneLine: a full Redis refuses a command of
// every game, and each game's warning names it, in an attribute and in
// the error's wrapping. They are written once a window, with their count,
// not once per game: 50 games wrote 879 lines in 8 s. Another cause, or
// another message, is still a line of its own.
func TestOneCauseForManyGamesIsOneLine(t *testing.T) {
	var out bytes.Buffer
	h := QuietRepeats(slog.NewJSONHandler(&out, nil)).(repeatHandler)
	now := time.Unix(1_700_000_000, 0)
	h.seen.now = func() time.Time { return now }
	log := slog.New(h)
	full := errors.New("OOM command not allowed when used memory > 'maxmemory'")
	for i := range 100 {
		game := "g" + strconv.Itoa(i)
		log.Warn("storage full", "err", fmt.Errorf("commit game %s: %w", game, full))
		log.With("game", game).Warn("presence", "err", fmt.Errorf("commit game %s: %w", game, full))
		log.Warn("presence", "game", game, "err", fmt.Errorf("commit game %s: %w", game, errors.New("i/o timeout")))
	}
	for _, want := range []struct {
		msg string
		n   int
	}{{`"msg":"storage full"`, 1}, {`"msg":"presence"`, 2}, {"commit game g0:", 3}} {
		if n := strings.Count(out.String(), want.msg); n != want.n {
			t.Errorf("%d lines with %s, want %d:\n%s", n, want.msg, want.n, out.String())
		}
	}
	now = now.Add(repeatWindow)
	out.Reset()
	log.Warn("storage full", "err", fmt.Errorf("commit game %s: %w", "g100", full))
	if !strings.Contains(out.String(), `"repeated":99`) {
		t.Errorf("the warning after the window: %q, want repeated 99", out.String())
	}
}

// TestJoinedErrorsCountByTheirCauses: one failure of many shards, joined
// in whatever order the shards answered, and retried after a longer wait
// each time, is one line; another set of causes is a line of its own.
func TestJoinedErrorsCountByTheirCauses(t *testing.T) {
	var out bytes.Buffer
	h := QuietRepeats(slog.NewJSONHandler(&out, nil)).(repeatHandler)
	h.seen.now = func() time.Time { return time.Unix(1_700_000_000, 0) }
	log := slog.New(h)
	full, down := errors.New("OOM command not allowed when used memory > 'maxmemory'"), errors.New("i/o timeout")
	shard := func(n int, cause error) error { return fmt.Errorf("read due deadlines of dl:{%d}: %w", n, cause) }
	log.Warn("read due deadlines", "err", errors.Join(shard(3, full), shard(1, full), shard(2, full)))
	log.Warn("read due deadlines", "err", errors.Join(shard(2, full), shard(3, full)))
	log.Warn("read due deadlines", "err", fmt.Errorf("sweep: %w", errors.Join(nil, shard(1, full))))
	log.Warn("read due deadlines", "err", errors.Join(shard(1, full)), "retry_in", 400*time.Millisecond)
	log.Warn("read due deadlines", "err", errors.Join(shard(1, full), shard(2, down)))
	log.Warn("read due deadlines", "err", errors.Join(shard(2, down), shard(1, full), shard(3, down)))
	if n := strings.Count(out.String(), `"msg":"read due deadlines"`); n != 2 {
		t.Errorf("%d lines, want 2 (one a set of causes):\n%s", n, out.String())
	}
}
