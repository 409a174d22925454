package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func palace(args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), code
}

const xiangqiStart = "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR w - - 0 1"

func TestRulesCLI(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantOut    string // exact stdout, when set
		wantLast   string // last line of stdout, when set
		wantLines  int    // number of stdout lines, when set
		wantCode   int
		wantErrSub string
	}{
		{name: "moves xiangqi start", args: []string{"rules", "moves", "--variant", "xiangqi", "--fen", xiangqiStart}, wantLines: 44},
		{name: "moves janggi start includes the pass", args: []string{"rules", "moves", "--variant", "janggi"}, wantLines: 32},
		{name: "moves of a mated side", args: []string{"rules", "moves", "--variant", "xiangqi", "--fen", "1R2k4/R8/9/9/9/9/9/9/9/3K5 b - - 0 1"}, wantOut: ""},
		{name: "perft", args: []string{"rules", "perft", "--variant", "xiangqi", "--depth", "3"}, wantLast: "79666"},
		{name: "perft divide", args: []string{"rules", "perft", "--variant", "janggi", "--depth", "2", "--divide"}, wantLast: "1024", wantLines: 33},
		{name: "adjudicate ongoing xiangqi has no points", args: []string{"rules", "adjudicate", "--variant", "xiangqi", "--moves", "h3e3 h10g8"},
			wantOut: `{"status":"ongoing","winner":"","method":""}` + "\n"},
		{name: "adjudicate ongoing janggi", args: []string{"rules", "adjudicate", "--variant", "janggi", "--moves", "a4a5"},
			wantOut: `{"status":"ongoing","winner":"","method":"","points":[72,73.5]}` + "\n"},
		{name: "adjudicate two passes", args: []string{"rules", "adjudicate", "--variant", "janggi", "--fen", "rnba1abnr/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR w - - 0 1", "--moves", "e2e2 e9e9"},
			wantOut: `{"status":"ended","winner":"second","method":"two_passes","points":[72,73.5]}` + "\n"},
		{name: "adjudicate checkmate", args: []string{"rules", "adjudicate", "--variant", "xiangqi", "--fen", "4k4/R8/9/9/9/9/9/9/9/1R1K5 w - - 0 1", "--moves", "b1b10"},
			wantOut: `{"status":"ended","winner":"first","method":"checkmate"}` + "\n"},
		{name: "illegal move names its ply", args: []string{"rules", "adjudicate", "--variant", "xiangqi", "--moves", "h3e3 a1a9"}, wantCode: 2, wantErrSub: "ply 2"},
		{name: "move after the end", args: []string{"rules", "adjudicate", "--variant", "xiangqi", "--fen", "4k4/R8/9/9/9/9/9/9/9/1R1K5 w - - 0 1", "--moves", "b1b10 e10e9"}, wantCode: 2, wantErrSub: "ply 2"},
		{name: "malformed move", args: []string{"rules", "adjudicate", "--variant", "xiangqi", "--moves", "h3e3 zz"}, wantCode: 2, wantErrSub: "ply 2"},
		{name: "bad variant", args: []string{"rules", "moves", "--variant", "chess"}, wantCode: 2, wantErrSub: "variant"},
		{name: "bad fen", args: []string{"rules", "moves", "--variant", "xiangqi", "--fen", "9/9 w"}, wantCode: 2, wantErrSub: "fen"},
		{name: "bad depth", args: []string{"rules", "perft", "--variant", "xiangqi", "--depth", "0"}, wantCode: 2, wantErrSub: "depth"},
		{name: "show marks check", args: []string{"rules", "show", "--variant", "janggi", "--fen", "4k4/9/9/9/9/9/9/4r4/4K4/9 w - - 0 1"}, wantLast: "first to move, in check"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := palace(tt.args...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", code, tt.wantCode, errOut)
			}
			if tt.wantErrSub != "" {
				if !strings.Contains(errOut, tt.wantErrSub) || strings.Count(errOut, "\n") != 1 || out != "" {
					t.Fatalf("stderr %q (want one line with %q), stdout %q", errOut, tt.wantErrSub, out)
				}
				return
			}
			if errOut != "" {
				t.Fatalf("stderr %q", errOut)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if tt.wantOut != "" || (tt.wantLast == "" && tt.wantLines == 0) {
				if out != tt.wantOut {
					t.Fatalf("stdout %q, want %q", out, tt.wantOut)
				}
			}
			if tt.wantLast != "" && lines[len(lines)-1] != tt.wantLast {
				t.Fatalf("last line %q, want %q", lines[len(lines)-1], tt.wantLast)
			}
			if tt.wantLines != 0 && len(lines) != tt.wantLines {
				t.Fatalf("%d lines, want %d", len(lines), tt.wantLines)
			}
		})
	}
}

func TestRulesMovesAreSortedAndUnique(t *testing.T) {
	out, _, code := palace("rules", "moves", "--variant", "janggi", "--fen", "1n1kaabn1/cr2N4/5C1c1/p1pNp3p/9/9/P1PbP1P1P/3r1p3/4A4/R1BA1KB1R b - - 0 1")
	if code != 0 {
		t.Fatal(code)
	}
	lines := strings.Fields(out)
	if len(lines) != 2 {
		t.Fatalf("%d moves, docs/rules.md perft says 2", len(lines))
	}
	for i := 1; i < len(lines); i++ {
		if lines[i-1] >= lines[i] {
			t.Fatalf("not in byte order: %v", lines)
		}
	}
}

// displayWidth is the number of terminal columns s takes: the hanja of the
// pieces are wide characters, two columns each.
func displayWidth(r rune) int {
	if r >= 0x2E80 {
		return 2
	}
	return 1
}

// boardCells splits a rank line of `palace rules show` into its rank number
// and its 9 cells of 3 columns each, or says where a character straddles
// two cells.
func boardCells(line string) (cells []string, err error) {
	col, cell := 0, ""
	for _, r := range line {
		w := displayWidth(r)
		if col < 3 {
			if col+w > 3 {
				return nil, fmt.Errorf("%q straddles the rank number and file a", r)
			}
		} else if (col-3)/3 != (col+w-1-3)/3 {
			return nil, fmt.Errorf("%q straddles files %c and %c", r, 'a'+(col-3)/3, 'a'+(col+w-1-3)/3)
		}
		if col >= 3 {
			cell += string(r)
		}
		col += w
		if col >= 3 && (col-3)%3 == 0 && cell != "" {
			cells = append(cells, cell)
			cell = ""
		}
	}
	if col != 3+3*9 || len(cells) != 9 {
		return nil, fmt.Errorf("%d columns in %d cells, want 30 in 9", col, len(cells))
	}
	return cells, nil
}

func TestRulesShowKeepsFilesAlignedWithAGeneralInCheck(t *testing.T) {
	tests := []struct {
		variant, fen string
		check        string // the general in check: its square
	}{
		{"janggi", "4k4/9/9/9/9/9/9/4r4/1r1AK1n2/9 w - - 0 1", "e2"},
		{"janggi", "9/1n1ak1r2/9/9/9/4R4/9/9/4K4/9 b - - 0 1", "e9"},
		{"xiangqi", "3k5/9/9/9/4r4/9/9/9/1r2K1n2/9 w - - 0 1", "e2"},
		{"xiangqi", "9/1n1ak1r2/9/9/9/4R4/9/9/9/3K5 b - - 0 1", "e9"},
	}
	for _, tt := range tests {
		for _, hanja := range []bool{false, true} {
			args := []string{"rules", "show", "--variant", tt.variant, "--fen", tt.fen}
			if hanja {
				args = append(args, "--hanja")
			}
			t.Run(strings.Join(args[2:], " "), func(t *testing.T) {
				out, errOut, code := palace(args...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errOut)
				}
				if !strings.Contains(out, "to move, in check\n") {
					t.Fatalf("the position is not check:\n%s", out)
				}
				ranks := 0
				for line := range strings.Lines(out) {
					line = strings.TrimSuffix(line, "\n")
					var rank int
					if _, err := fmt.Sscanf(line, "%d", &rank); err != nil {
						continue
					}
					ranks++
					cells, err := boardCells(line)
					if err != nil {
						t.Fatalf("rank %d is not aligned: %v\n%s", rank, err, out)
					}
					marked := fmt.Sprintf("%c%d", 'a'+slices.IndexFunc(cells, func(c string) bool {
						return strings.ContainsAny(c, "[!")
					}), rank)
					if strings.ContainsAny(line, "[!") && marked != tt.check {
						t.Errorf("check marked on %s, want %s\n%s", marked, tt.check, out)
					}
				}
				if ranks != 10 {
					t.Fatalf("%d ranks drawn, want 10\n%s", ranks, out)
				}
				if !strings.ContainsAny(out, "[!") {
					t.Fatalf("no check marked\n%s", out)
				}
			})
		}
	}
}

// Without --hanja the board is drawn as it always was; scripts may read it.
func TestRulesShowPlainBoard(t *testing.T) {
	out, _, code := palace("rules", "show", "--variant", "janggi", "--fen", "4k4/9/9/9/9/9/9/4r4/1r1AK1n2/9 w - - 0 1")
	want := "" +
		"10  .  .  .  +  k  +  .  .  . \n" +
		" 9  .  .  .  +  +  +  .  .  . \n" +
		" 8  .  .  .  +  +  +  .  .  . \n" +
		" 7  .  .  .  .  .  .  .  .  . \n" +
		" 6  .  .  .  .  .  .  .  .  . \n" +
		" 5  .  .  .  .  .  .  .  .  . \n" +
		" 4  .  .  .  .  .  .  .  .  . \n" +
		" 3  .  .  .  +  r  +  .  .  . \n" +
		" 2  .  r  .  A [K] +  n  .  . \n" +
		" 1  .  .  .  +  +  +  .  .  . \n" +
		"    a  b  c  d  e  f  g  h  i\n" +
		"first to move, in check\n"
	if code != 0 || out != want {
		t.Fatalf("exit %d, board\n%s\nwant\n%s", code, out, want)
	}
}

func TestRulesUnknownSubcommand(t *testing.T) {
	for _, args := range [][]string{
		{"rules", "frobnicate"},
		{"rules", "frobnicate", "--variant", "janggi"},
		{"rules", "frobnicate", "--no-such-flag"},
		{"rules", "--variant", "janggi"},
	} {
		out, errOut, code := palace(args...)
		first, _, _ := strings.Cut(errOut, "\n")
		want := fmt.Sprintf("palace rules: unknown subcommand %q", args[1])
		if code != 2 || out != "" || first != want || !strings.Contains(errOut, "usage: palace rules") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q with the usage", args, code, out, errOut, want)
		}
	}
}

// TestRulesPerftStopsWhenInterrupted: the first SIGINT or SIGTERM cancels
// main's context (app.SignalContext), so a deep count stops soon after
// Ctrl-C or `timeout`'s signal, and says it did not finish.
func TestRulesPerftStopsWhenInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	var out, errOut bytes.Buffer
	start := time.Now()
	// 133,312,995 leaves: about 2 s of one core.
	code := run(ctx, []string{"rules", "perft", "--variant", "xiangqi", "--depth", "5"}, strings.NewReader(""), &out, &errOut)
	took := time.Since(start)
	if code == exitOK || took > time.Second {
		t.Fatalf("interrupted 50ms in: exit %d after %v, stdout %q; want a non-zero exit soon after the interrupt",
			code, took.Round(time.Millisecond), strings.TrimSpace(out.String()))
	}
}
