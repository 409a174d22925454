package uci

import (
	"context"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/engine"
)

// FuzzRun feeds arbitrary command scripts to the UCI front end: whatever a
// GUI or a script sends, it must answer without panicking and stop when
// told to quit.
func FuzzRun(f *testing.F) {
	for _, seed := range []string{
		"uci\nisready\n",
		"setoption name UCI_Variant value janggi\nposition startpos moves e2e2 e9e9\ngo depth 2\n",
		"position fen rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR w - - 0 1 moves h2e2\ngo nodes 500\n",
		"position fen 3a1a3/4k4/9/9/9/9/9/9/9/R2K5 b - - 0 1\ngo movetime 5\nstop\n",
		"go wtime 100 btime 100 winc 0 binc 0\n",
		"go infinite\nstop\nisready\n",
		"setoption name Skill Level value 1\nucinewgame\ngo\n",
		"position startpos moves zz99 a0a0\ngo depth -1\n",
		"setoption name Hash value 99999999\nsetoption name\nposition\ngo searchmoves\n",
		"setoption name Hash value 2\nsetoption name Clear Hash\nsetoption name Hash value x\ngo depth 2\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, script string) {
		// Big hashes and deep perfts are valid requests that take memory
		// and time, not bugs; keep them out of the fuzzer's way. Small
		// hashes, Clear Hash and malformed Hash options are fuzzed.
		lower := strings.ToLower(script)
		if strings.Contains(lower, "perft") || bigHash(lower) {
			t.Skip()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		in := strings.NewReader(script + "\nstop\nquit\n")
		if err := Run(ctx, in, io.Discard); err != nil && ctx.Err() != nil {
			t.Fatalf("still running after 5 s: %q", script)
		}
	})
}

func FuzzInfoScore(f *testing.F) {
	for _, seed := range []string{"info depth 3 score cp 12 pv h2e2", "info score mate -3", "info score mate 99999999999999999999", "info string score cp 1"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		score, ok := infoScore(line)
		if !ok {
			return
		}
		f := strings.Fields(line)
		i := slices.Index(f, "score")
		if i < 0 {
			t.Fatalf("infoScore(%q) = %d from a line without a score", line, score)
		}
		// A mate is a score of MateScore-plies for the side that mates,
		// -(MateScore-plies) for the side mated, never more, and never
		// the other side's.
		if f[i+1] == "mate" {
			n, _ := strconv.Atoi(f[i+2])
			if score > engine.MateScore || score < -engine.MateScore || (n > 0) != (score > 0) {
				t.Fatalf("infoScore(%q) = %d, not a mate for the side mate %d names", line, score, n)
			}
		}
	})
}

// bigHash reports whether a script asks for a hash table above 16 MB that
// the engine would allocate (larger sizes are refused, and fuzzed). It
// reads each line's name and value as setoption does, whatever their order
// and spacing.
func bigHash(lower string) bool {
	for line := range strings.Lines(lower) {
		var name, value []string
		into := &name
		for _, w := range strings.Fields(line) {
			switch w {
			case "name":
				into = &name
			case "value":
				into = &value
			default:
				*into = append(*into, w)
			}
		}
		if len(name) < 2 || name[0] != "setoption" || strings.Join(name[1:], " ") != "hash" {
			continue
		}
		n, err := strconv.Atoi(strings.Join(value, " "))
		if err == nil && n > 16 && n <= maxHashMB {
			return true
		}
	}
	return false
}

func TestBigHash(t *testing.T) {
	for script, want := range map[string]bool{
		"setoption name hash value 4096":         true,
		"setoption value 4096 name hash":         true,
		"setoption  name\thash   value 4096\n":   true,
		"go\nsetoption name hash value 64\n":     true,
		"setoption name hash value 16":           false,
		"setoption name hash value 99999999":     false,
		"setoption name clear hash":              false,
		"setoption name hash value x":            false,
		"setoption name skill level value 4096":  false,
		"position startpos\nsetoption name hash": false,
	} {
		if got := bigHash(script); got != want {
			t.Errorf("bigHash(%q) = %v, want %v", script, got, want)
		}
	}
}
