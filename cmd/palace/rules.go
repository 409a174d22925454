package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/palacehq/palace/pkg/rules"
)

const rulesUsage = `usage: palace rules <moves|perft|show|adjudicate> --variant janggi|xiangqi [flags]

  moves       --fen FEN                     legal moves, sorted, one per line
  perft       --fen FEN --depth N [--divide] leaf count (last line)
  show        --fen FEN [--hanja]           the board
  adjudicate  --fen START --moves "m1 m2"   replay and print the result as JSON

--fen defaults to the start position of --variant.
`

// runRules implements `palace rules`. Bad input prints one line on stderr
// and exits 2, so scripts can tell it from a result.
func runRules(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, rulesUsage)
		return exitUsage
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, rulesUsage)
		return exitOK
	}
	sub := args[0]
	// Before the flags: a misspelt subcommand is the mistake to name, not
	// the --variant its caller had no reason to give yet.
	if !slices.Contains([]string{"moves", "perft", "show", "adjudicate"}, sub) {
		fmt.Fprintf(stderr, "palace rules: unknown subcommand %q\n\n%s", sub, rulesUsage)
		return exitUsage
	}
	fs := flag.NewFlagSet("palace rules "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	variantName := fs.String("variant", "", "janggi or xiangqi")
	fen := fs.String("fen", "", "position (default: the start position)")
	depth := fs.Int("depth", 0, "perft depth")
	divide := fs.Bool("divide", false, "perft: count per root move")
	hanja := fs.Bool("hanja", false, "show: draw pieces as hanja")
	moves := fs.String("moves", "", "adjudicate: space-separated moves")
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "palace rules %s: %s\n", sub, strings.ReplaceAll(fmt.Sprintf(format, a...), "\n", " "))
		return exitUsage
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, rulesUsage)
			return exitOK
		}
		return fail("%v", err)
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q", fs.Arg(0))
	}
	v, err := rules.ParseVariant(*variantName)
	if err != nil {
		return fail("--variant: %v", err)
	}
	if *fen == "" {
		*fen = rules.StartFEN(v)
	}
	switch sub {
	case "moves":
		pos, err := rules.ParseFEN(v, *fen)
		if err != nil {
			return fail("--fen: %v", err)
		}
		for _, m := range sortedMoves(pos.LegalMoves(nil)) {
			fmt.Fprintln(stdout, m)
		}
	case "perft":
		pos, err := rules.ParseFEN(v, *fen)
		if err != nil {
			return fail("--fen: %v", err)
		}
		if *depth < 1 || *depth > 8 {
			return fail("--depth %d: want 1..8", *depth)
		}
		// Counted first move by first move, so that Ctrl-C (or a
		// timeout's SIGTERM) stops a deep count.
		counts := map[string]uint64{}
		var total uint64
		if err := rules.DivideEach(ctx, pos, *depth, func(m rules.Move, n uint64) {
			counts[m.String()] = n
			total += n
		}); err != nil {
			fmt.Fprintf(stderr, "palace rules perft: stopped: %v\n", err)
			return exitFail
		}
		if *divide {
			for _, m := range sortedMoves(pos.LegalMoves(nil)) {
				fmt.Fprintf(stdout, "%s: %d\n", m, counts[m])
			}
		}
		fmt.Fprintln(stdout, total)
	case "show":
		pos, err := rules.ParseFEN(v, *fen)
		if err != nil {
			return fail("--fen: %v", err)
		}
		fmt.Fprint(stdout, drawBoard(pos, *hanja))
	case "adjudicate":
		line, err := adjudicate(v, *fen, *moves)
		if err != nil {
			return fail("%v", err)
		}
		fmt.Fprintln(stdout, line)
	}
	return exitOK
}

func sortedMoves(ms []rules.Move) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.String()
	}
	slices.Sort(out)
	return out
}

type adjudication struct {
	Status string      `json:"status"`
	Winner string      `json:"winner"`
	Method string      `json:"method"`
	Points *[2]float64 `json:"points,omitempty"`
}

// adjudicate replays moves from start and reports the game's state.
func adjudicate(v rules.Variant, start, moves string) (string, error) {
	g, err := rules.NewGame(v, start)
	if err != nil {
		return "", fmt.Errorf("--fen: %w", err)
	}
	for i, text := range strings.Fields(moves) {
		m, err := rules.ParseMove(text)
		if err != nil {
			return "", fmt.Errorf("ply %d: %w", i+1, err)
		}
		if _, err := g.Play(m); err != nil {
			return "", err
		}
	}
	o := g.Outcome()
	out := adjudication{Status: "ongoing", Winner: o.Winner.String(), Method: o.Method.String()}
	if o.Ended {
		out.Status = "ended"
	}
	if v == rules.Janggi {
		out.Points = &o.Points
	}
	b, err := json.Marshal(out)
	return string(b), err
}
