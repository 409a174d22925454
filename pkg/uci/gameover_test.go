package uci

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/rules"
)

// goDepth1 sends "go depth 1" and returns the bestmove line and the lines
// before it.
func goDepth1(c *conversation) (string, []string) {
	c.t.Helper()
	c.send("go depth 1")
	return c.expect("bestmove")
}

func hasLine(lines []string, prefix, substr string) bool {
	return slices.ContainsFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, prefix) && strings.Contains(l, substr)
	})
}

// Two passes end a Janggi game: go has no move to give.
func TestGameOverJanggiTwoPasses(t *testing.T) {
	c := start(t)
	c.send("setoption name UCI_Variant value janggi")
	c.send("position startpos moves e2e2 e9e9")
	line, before := goDepth1(c)
	if line != "bestmove (none)" {
		t.Errorf("after two passes: got %q, want bestmove (none)", line)
	}
	if !hasLine(before, "info string", "two_passes") {
		t.Errorf("no info string naming two_passes in %q", before)
	}
}

// Threefold repetition ends a Xiangqi game as a draw.
func TestGameOverXiangqiRepetition(t *testing.T) {
	c := start(t)
	c.send("position startpos moves h1g3 h10g8 g3h1 g8h10 h1g3 h10g8 g3h1 g8h10")
	line, before := goDepth1(c)
	if line != "bestmove (none)" {
		t.Errorf("after a threefold repetition: got %q, want bestmove (none)", line)
	}
	if !hasLine(before, "info string", "repetition") {
		t.Errorf("no info string naming the repetition in %q", before)
	}
	// One cycle less is no repetition yet: go answers a move.
	c.send("position startpos moves h1g3 h10g8 g3h1 g8h10")
	line, _ = goDepth1(c)
	bestMoveLegal(t, line, rules.Xiangqi, rules.StartFEN(rules.Xiangqi), "h1g3", "h10g8", "g3h1", "g8h10")
}

// A move after the end is refused like an illegal move: reported, and the
// moves before it stay.
func TestGameOverMoveRefused(t *testing.T) {
	c := start(t)
	c.send("setoption name UCI_Variant value janggi")
	c.send("position startpos moves e2e2 e9e9 e2e2 e9e9 b1c3")
	line, _ := c.expect("info string")
	if !strings.Contains(line, "error") || !strings.Contains(line, "move 3 ") || !strings.Contains(line, "game over") {
		t.Errorf("got %q, want move 3 refused as game over", line)
	}
	c.send("d")
	line, _ = c.expect("info string fen")
	// Two passes kept: the start board, Cho to move, two plies played.
	want := strings.Fields(rules.StartFEN(rules.Janggi))
	if got := strings.Fields(line); len(got) != 9 || !slices.Equal(got[3:5], want[:2]) || got[8] != "2" {
		t.Errorf("got %q, want the start position after two passes", line)
	}
	line, _ = goDepth1(c)
	if line != "bestmove (none)" {
		t.Errorf("got %q, want bestmove (none)", line)
	}

	// Xiangqi: a move after the repetition is refused too.
	c.send("setoption name UCI_Variant value xiangqi")
	c.send("position startpos moves h1g3 h10g8 g3h1 g8h10 h1g3 h10g8 g3h1 g8h10 b1c3")
	line, _ = c.expect("info string")
	if !strings.Contains(line, "move 9 ") || !strings.Contains(line, "game over") {
		t.Errorf("got %q, want move 9 refused as game over", line)
	}
}

// go perft runs like a search: stop ends it at once and quit returns.
func TestPerftStopQuit(t *testing.T) {
	inR, inW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), inR, io.Discard) }()
	defer inW.Close()
	send := func(cmd string) {
		t.Helper()
		sent := make(chan error, 1)
		go func() { _, err := io.WriteString(inW, cmd+"\n"); sent <- err }()
		select {
		case err := <-sent:
			if err != nil {
				t.Fatalf("send %q: %v", cmd, err)
			}
		case <-time.After(time.Second):
			t.Fatalf("%q not read within 1 s: the command loop is blocked", cmd)
		}
	}
	send("position startpos")
	send("go perft 7")
	time.Sleep(100 * time.Millisecond)
	send("stop")
	send("quit")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Run still running 1 s after stop and quit")
	}
}

// Cancelling the context (Ctrl-C) ends a running perft too.
func TestPerftContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	defer inW.Close()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, inR, io.Discard) }()
	if _, err := io.WriteString(inW, "go perft 7\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Run still running 1 s after the context ended")
	}
}

func TestPerftCountsAndLimit(t *testing.T) {
	c := start(t)
	c.send("setoption name UCI_Variant value janggi")
	c.send("position startpos")
	c.send("go perft 3")
	line, before := c.expect("Nodes searched")
	if line != "Nodes searched: 33316" { // docs/rules.md's reference count
		t.Errorf("janggi perft 3: got %q, want 33316", line)
	}
	if n := len(before); n != 33 { // 32 root moves and a blank line
		t.Errorf("got %d lines before the total, want 33: %q", n, before)
	}
	c.send("go perft 9")
	line, _ = c.expect("info string error")
	if !strings.Contains(line, "error") || !strings.Contains(line, "perft 9") {
		t.Errorf("go perft 9: got %q, want it refused", line)
	}
	c.send("isready")
	_, before = c.expect("readyok")
	if hasLine(before, "Nodes searched", "") {
		t.Errorf("go perft 9 ran: %q", before)
	}
}
