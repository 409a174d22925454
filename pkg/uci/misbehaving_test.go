package uci

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/rules"
)

// TestAFailedStartSaysWhy: an engine that cannot start (a missing
// network file, a wrong option) says why on stderr and exits with a
// status. Start's error, which is all an operator of --ai-uci-engine gets
// (the service does not start, or a worker logs it at each replacement),
// had neither: "uci handshake: uci: engine closed".
func TestAFailedStartSaysWhy(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "engine")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'fatal: cannot open nn-1234.nnue' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Start(ctx, script)
	if err == nil {
		_ = c.Close()
		t.Fatal("Start succeeded")
	}
	if !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "nn-1234.nnue") {
		t.Fatalf("Start of an engine that exited with status 3 saying why on stderr: %q; want its exit status and its message", err)
	}
}

// TestMoveWithinStopsAnOverrunningSearch: MoveWithin's most is the most
// the engine may take, as a game's clock caps it, but it was only sent as
// "movetime": an engine that overran it (one that ignores movetime, or is
// slow to notice it) was never told to stop, and MoveWithin waited until
// ctx ended (the AI worker's 30 s --ai-uci-move-timeout), though the
// engine answers a stop at once: the AI seat lost on time.
func TestMoveWithinStopsAnOverrunningSearch(t *testing.T) {
	c := fakeEngine(t, func(cmd string, say func(...string)) {
		if cmd == "stop" {
			say("info depth 3 score cp 20 pv h3e3", "bestmove h3e3")
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	const most = 300 * time.Millisecond
	start := time.Now()
	_, err := c.MoveWithin(ctx, rules.Xiangqi, rules.StartFEN(rules.Xiangqi), nil, most)
	took := time.Since(start)
	// Without the stop, MoveWithin waits for ctx (3 s); the slack is for a
	// loaded machine under -race.
	if err != nil || took > most+time.Second {
		t.Fatalf("MoveWithin(most %v) of an engine that overruns its movetime but answers stop: %v after %v; want its bestmove, asked for with stop when most is spent", most, err, took.Round(time.Millisecond))
	}
}

// TestAnOverrunningSearchIsStoppedAtTheMovetimeSent: the stop was timed
// on MoveWithin's most (the clock's cap, a thirtieth of the main time:
// 20 s in a 10-minute game), not on the movetime the go command carried
// (1 s by default), so an engine that overran its movetime searched on
// until the cap; untimed (Move, most 0), it was never asked to stop.
func TestAnOverrunningSearchIsStoppedAtTheMovetimeSent(t *testing.T) {
	c := fakeEngine(t, func(cmd string, say func(...string)) {
		if cmd == "stop" {
			say("info depth 3 score cp 20 pv h3e3", "bestmove h3e3")
		}
	})
	const movetime = 200 * time.Millisecond
	c.Go = GoParams{MoveTime: movetime}
	for _, most := range []time.Duration{4 * time.Second, 0} {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
		start := time.Now()
		r, err := c.MoveWithin(ctx, rules.Xiangqi, rules.StartFEN(rules.Xiangqi), nil, most)
		took := time.Since(start)
		cancel()
		// Without the stop, the search runs on to most (4 s) or ctx (6 s).
		if err != nil || r.Move.String() != "h3e3" || took > movetime+time.Second {
			t.Fatalf("an engine sent movetime %v (most %v) that overruns it but answers stop: %v %v after %v; want its bestmove, asked for with stop once the movetime is spent", movetime, most, r.Move, err, took.Round(time.Millisecond))
		}
	}
}

// TestALineTooLongIsSaidSo: an engine line longer than the reader's 1 MiB
// limit ends the reader (bufio.ErrTooLong), which was dropped: the request
// failed with ErrClosed, "engine closed", though the engine ran on, and
// the log of the replacement pointed the operator at a crash that never
// happened.
func TestALineTooLongIsSaidSo(t *testing.T) {
	c := fakeEngine(t, func(cmd string, say func(...string)) {
		if strings.HasPrefix(cmd, "go") {
			go say("info string "+strings.Repeat("x", 2<<20), "bestmove h3e3")
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := c.MoveWithin(ctx, rules.Xiangqi, rules.StartFEN(rules.Xiangqi), nil, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "too long") {
		t.Fatalf("MoveWithin after the engine sent a 2 MiB line: %v; want an error saying the line was too long, not that the engine closed", err)
	}
}
