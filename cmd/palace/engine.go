package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/palacehq/palace/pkg/engine"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/pkg/uci"
)

const uciUsage = `usage: palace uci

Speaks UCI on stdin and stdout, for engine GUIs and other engines, as
Fairy-Stockfish does for these games ("setoption name UCI_Variant value
janggi" or xiangqi). It takes no arguments.
`

// runUCI speaks UCI on stdin/stdout, for engine GUIs and other engines.
// Asked for help, it answers with its usage rather than start an engine
// that waits silently for commands.
func runUCI(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if isHelp(args[0]) {
			fmt.Fprint(stdout, uciUsage)
			return exitOK
		}
		fmt.Fprintf(stderr, "palace uci: unexpected argument %q\n\n%s", args[0], uciUsage)
		return exitUsage
	}
	if err := uci.Run(ctx, stdin, stdout); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "palace uci:", err)
		return exitFail
	}
	return exitOK
}

const engineUsage = `usage: palace engine match --a PLAYER --b PLAYER [--games N] [--variant janggi|xiangqi]

A player is "level:N" (the built-in engine at level 1-10) or "uci:/path/to/engine"
(options after the path as ",name=value", e.g. "uci:/usr/bin/fairy-stockfish,Threads=1").
Run "palace engine match -h" for every flag.
`

func runEngine(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, engineUsage)
		return exitOK
	}
	if len(args) == 0 || args[0] != "match" {
		fmt.Fprint(stderr, engineUsage)
		return exitUsage
	}
	fs := flag.NewFlagSet("palace engine match", flag.ContinueOnError)
	fs.SetOutput(stderr)
	a := fs.String("a", "level:6", "first player: level:N (the built-in engine, 1-10) or uci:/path/to/engine[,name=value...]")
	b := fs.String("b", "level:4", "second player, as --a")
	games := fs.Int("games", 40, "games (sides alternate; each opening is played from both sides)")
	variantName := fs.String("variant", "xiangqi", "janggi or xiangqi")
	openingPlies := fs.Int("opening-plies", 4, "random opening plies before the engines take over (0: start position)")
	seed := fs.Uint64("seed", 1, "seed of the openings and the levels' randomness")
	parallel := fs.Int("parallel", 1, "games played at once (each with its own engines); a match replays exactly with the same --seed and --parallel")
	adj := engine.DefaultAdjudication()
	fs.IntVar(&adj.ResignScore, "resign-score", adj.ResignScore, "adjudicate a loss when both players score the game beyond this many centipawns ...")
	fs.IntVar(&adj.ResignMoves, "resign-moves", adj.ResignMoves, "... on this many moves each in a row (0: never)")
	fs.IntVar(&adj.DrawMoves, "draw-moves", adj.DrawMoves, "Xiangqi: adjudicate a draw when both players score the game level on this many moves each in a row (0: never) ...")
	fs.IntVar(&adj.DrawScore, "draw-score", adj.DrawScore, "... within this many centipawns ...")
	fs.IntVar(&adj.DrawAfter, "draw-after", adj.DrawAfter, "... after this ply")
	if code, ok := parseFlags(fs, args[1:], stderr); !ok {
		return code
	}
	v, err := rules.ParseVariant(*variantName)
	if err != nil || *games < 1 || *parallel < 1 || *parallel > 64 {
		fmt.Fprintln(stderr, "palace engine match: want --variant janggi|xiangqi, --games >= 1, --parallel 1..64")
		return exitUsage
	}
	if err := checkMatchFlags(*openingPlies, adj); err != nil {
		fmt.Fprintln(stderr, "palace engine match:", err)
		return exitUsage
	}
	specA, errA := parsePlayer(*a)
	specB, errB := parsePlayer(*b)
	if err := errors.Join(errA, errB); err != nil {
		fmt.Fprintln(stderr, "palace engine match:", err)
		return exitUsage
	}
	var openings []engine.Opening
	if *openingPlies > 0 {
		openings = engine.RandomOpenings(v, (*games+1)/2, *openingPlies, *seed)
		if len(openings) == 0 {
			fmt.Fprintf(stderr, "palace engine match: every random opening of %d plies ended the game: give fewer --opening-plies\n", *openingPlies)
			return exitUsage
		}
	}
	// Each worker plays a contiguous share of the openings with its own
	// players, so results do not depend on scheduling; they do depend on
	// the shares, the players keeping what they learnt from one game to
	// the next.
	chunk := (*games + *parallel - 1) / *parallel
	chunk += chunk % 2
	var mu sync.Mutex
	var total engine.MatchResult
	var names [2]string
	var firstErr error
	var wg sync.WaitGroup
	for start := 0; start < *games; start += chunk {
		n := min(chunk, *games-start)
		ops := openingsOf(openings, start, n)
		wg.Go(func() {
			pa, closeA, err := newPlayer(ctx, specA, *seed+uint64(start))
			if err != nil {
				mu.Lock()
				firstErr = errors.Join(firstErr, err)
				mu.Unlock()
				return
			}
			defer closeA()
			pb, closeB, err := newPlayer(ctx, specB, *seed+uint64(start)+7)
			if err != nil {
				mu.Lock()
				firstErr = errors.Join(firstErr, err)
				mu.Unlock()
				return
			}
			defer closeB()
			mu.Lock()
			names = [2]string{pa.Name(), pb.Name()}
			mu.Unlock()
			_, err = engine.Match(ctx, pa, pb, n, v, ops, adj, func(rec engine.GameRecord, _ engine.MatchResult) {
				mu.Lock()
				defer mu.Unlock()
				total.Add(rec)
				fmt.Fprintf(stderr, "game %d/%d: %s vs %s: %v %s  | %s %d-%d-%d (%.1f%%)\n",
					total.Games, *games, rec.First, rec.Second, rec.Outcome, rec.Note, pa.Name(), total.Wins, total.Draws, total.Losses, 100*total.Score)
			})
			if err != nil {
				mu.Lock()
				firstErr = errors.Join(firstErr, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		fmt.Fprintln(stderr, "palace engine match:", firstErr)
		if total.Games == 0 {
			return exitFail
		}
	}
	fmt.Fprintf(stdout, "%-24s %6s %6s %6s %6s %8s %s\n", "player", "games", "wins", "draws", "losses", "score", "elo (95%)")
	fmt.Fprintf(stdout, "%-24s %6d %6d %6d %6d %7.1f%% %+.0f [%+.0f, %+.0f]\n", names[0], total.Games, total.Wins, total.Draws, total.Losses, 100*total.Score, total.Elo, total.EloLow, total.EloHigh)
	fmt.Fprintf(stdout, "%-24s %6d %6d %6d %6d %7.1f%% %+.0f\n", names[1], total.Games, total.Losses, total.Draws, total.Wins, 100*(1-total.Score), -total.Elo)
	if firstErr != nil {
		// The table above is of the games played: a script must not take
		// it for the whole match.
		fmt.Fprintf(stderr, "palace engine match: stopped after %d of %d games\n", total.Games, *games)
		return exitFail
	}
	return exitOK
}

// checkMatchFlags reports every flag of a match's openings and
// adjudication out of range. A negative resign score, say, adjudicated
// games that were level, or even won, as lost ("both sides scored it
// lost"): the table printed a strength the engines do not have.
func checkMatchFlags(openingPlies int, adj engine.Adjudication) error {
	var errs []error
	if openingPlies < 0 {
		errs = append(errs, fmt.Errorf("--opening-plies %d: want 0 or more", openingPlies))
	}
	if adj.ResignMoves < 0 {
		errs = append(errs, fmt.Errorf("--resign-moves %d: want 0 (never) or more", adj.ResignMoves))
	}
	if adj.ResignMoves > 0 && adj.ResignScore <= 0 {
		errs = append(errs, fmt.Errorf("--resign-score %d: want a positive score, how far behind a side is to resign", adj.ResignScore))
	}
	if adj.DrawMoves < 0 {
		errs = append(errs, fmt.Errorf("--draw-moves %d: want 0 (never) or more", adj.DrawMoves))
	}
	if adj.DrawScore < 0 {
		errs = append(errs, fmt.Errorf("--draw-score %d: want 0 or more", adj.DrawScore))
	}
	if adj.DrawAfter < 0 {
		errs = append(errs, fmt.Errorf("--draw-after %d: want 0 or more", adj.DrawAfter))
	}
	return errors.Join(errs...)
}

// openingsOf returns the openings of the n games from game start, each
// played from both sides. RandomOpenings leaves out those that end the
// game, so there may be fewer than games: they are played again in turn.
func openingsOf(openings []engine.Opening, start, n int) []engine.Opening {
	if len(openings) == 0 {
		return nil
	}
	ops := make([]engine.Opening, 0, (n+1)/2)
	for j := range (n + 1) / 2 {
		ops = append(ops, openings[(start/2+j)%len(openings)])
	}
	return ops
}

// playerSpec is a parsed --a or --b: a level of the built-in engine, or
// a UCI engine's path and options (name=value).
type playerSpec struct {
	spec    string
	level   int
	path    string
	options []string
}

func parsePlayer(spec string) (playerSpec, error) {
	kind, rest, _ := strings.Cut(spec, ":")
	switch kind {
	case "level":
		n, err := strconv.Atoi(rest)
		if err != nil || n < engine.MinLevel || n > engine.MaxLevel {
			return playerSpec{}, fmt.Errorf("player %q: want level:1..10", spec)
		}
		return playerSpec{spec: spec, level: n}, nil
	case "uci":
		parts := strings.Split(rest, ",")
		if parts[0] == "" {
			return playerSpec{}, fmt.Errorf("player %q: want uci:/path/to/engine", spec)
		}
		for _, opt := range parts[1:] {
			if name, _, ok := strings.Cut(opt, "="); !ok || name == "" {
				return playerSpec{}, fmt.Errorf("player %q: option %q: want name=value", spec, opt)
			}
		}
		return playerSpec{spec: spec, path: parts[0], options: parts[1:]}, nil
	}
	return playerSpec{}, fmt.Errorf("player %q: want level:N or uci:/path", spec)
}

func newPlayer(ctx context.Context, ps playerSpec, seed uint64) (engine.Player, func(), error) {
	if ps.path == "" {
		return engine.NewLevelPlayer(ps.level, seed, 16), func() {}, nil
	}
	c, err := uci.Start(ctx, ps.path)
	if err != nil {
		return nil, nil, fmt.Errorf("player %q: %w", ps.spec, err)
	}
	for _, opt := range ps.options {
		name, value, _ := strings.Cut(opt, "=")
		if err := c.SetOption(ctx, name, value); err != nil {
			_ = c.Close()
			return nil, nil, fmt.Errorf("player %q option %s: %w", ps.spec, name, err)
		}
	}
	return c, func() { _ = c.Close() }, nil
}
