// Command palace is Palace's all-in-one server and command-line tool:
//
//	palace serve      every service in one process on one port
//	palace rules ...  legal moves, perft, boards and adjudication
//	palace uci        the engine behind the UCI protocol
//	palace engine     engine matches
//	palace loadtest   load tests of a running server
//	palace keygen, service-token, player-token  keys and credentials for operators
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/palacehq/palace/pkg/app"
)

func main() {
	ctx, stop := app.SignalContext()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: palace <command> [flags]

commands:
  serve          run every Palace service in one process (default localhost:8080)
  rules          rules tools: moves, perft, show, adjudicate
  health         check a server's gRPC health (for container health checks)
  loadtest       load tests: games, clocks, matchmaking, ai
  uci            the engine behind the UCI protocol (stdin/stdout)
  engine         engine tools: match
  keygen         print a new signing key (id:hexsecret) for the --*-keys flags
  service-token  print a service credential for internal calls (CreateGame)
  player-token   print an account credential for a player id of yours (rated play without Google)

Run "palace <command> -h" for the flags of a command.
`

// Exit codes: 0 success, 1 failure at run time (for serve, also any bad
// flag value or PALACE_* value, every one named at once), 2 bad usage or
// input (for serve, an unknown flag or a stray argument).
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], stderr)
	case "uci":
		return runUCI(ctx, args[1:], stdin, stdout, stderr)
	case "engine":
		return runEngine(ctx, args[1:], stdout, stderr)
	case "loadtest":
		return runLoadtest(ctx, args[1:], stdout, stderr)
	case "health":
		return runHealth(ctx, args[1:], stdout, stderr)
	case "keygen":
		return runKeygen(args[1:], stdout, stderr)
	case "service-token":
		return runServiceToken(args[1:], stdout, stderr)
	case "player-token":
		return runPlayerToken(args[1:], stdout, stderr)
	case "rules":
		return runRules(ctx, args[1:], stdout, stderr)
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "palace: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// parseFlags parses a command that takes flags only; ok is false when it
// must exit with code instead of running: 0 once -h has printed the
// flags, since asking for them is no usage error, 2 for a bad flag (one
// whose value app.DeferValueErrors holds is left to the configuration's
// check, as serve does) or an argument left over (often a flag written without its dashes, which
// would otherwise be ignored), named on stderr.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, ok bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK, false
	case err != nil:
		return exitUsage, false
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q: it takes flags only (%s -h)\n", fs.Name(), fs.Arg(0), fs.Name())
		return exitUsage, false
	}
	return exitOK, true
}

// isHelp reports whether arg asks for a command's usage: the usage says
// "palace <command> -h", and commands with subcommands read that -h where
// a subcommand's name goes.
func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}
