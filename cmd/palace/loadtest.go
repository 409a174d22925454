package main

import (
	"context"
	"fmt"
	"io"
)

const loadtestUsage = `usage: palace loadtest <games|clocks|matchmaking|ai> --addr ADDR [flags]

Each load test prints progress lines while it runs and, as its LAST line,
one JSON object with its figures.
`

func runLoadtest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, loadtestUsage)
		return exitUsage
	}
	switch args[0] {
	case "games":
		return runLoadtestGames(ctx, args[1:], stdout, stderr)
	case "clocks":
		return runLoadtestClocks(ctx, args[1:], stdout, stderr)
	case "ai":
		return runLoadtestAI(ctx, args[1:], stdout, stderr)
	case "matchmaking":
		return runLoadtestMatchmaking(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "palace loadtest: unknown load test %q\n\n%s", args[0], loadtestUsage)
	return exitUsage
}
