package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/palacehq/palace/pkg/apptest"
)

// TestMain gives every server and load tool these tests start the same
// --service-keys (through their environment fallback), as a deployment
// gives every process the same keys.
func TestMain(m *testing.M) {
	if err := os.Setenv("PALACE_SERVICE_KEYS", apptest.ServiceKeys); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// TestCommandHelp: the usage tells users to run "palace <command> -h", so
// a command with subcommands answers -h with its usage, not with an error
// about a missing flag or an unknown subcommand.
func TestCommandHelp(t *testing.T) {
	for _, cmd := range []string{"rules", "loadtest", "engine"} {
		for _, h := range []string{"-h", "--help", "help"} {
			out, errOut, code := palace(cmd, h)
			if code != exitOK || errOut != "" || !strings.HasPrefix(out, "usage: palace "+cmd+" ") {
				t.Errorf("palace %s %s: exit %d, stdout %q, stderr %q; want exit 0 and the usage on stdout", cmd, h, code, out, errOut)
			}
		}
	}
}

// TestFlagHelp: -h on a command with flags prints them and exits 0, as
// palace serve and the daemons do; asking for help is no usage error.
func TestFlagHelp(t *testing.T) {
	for _, args := range [][]string{
		{"serve"}, {"health"}, {"keygen"}, {"service-token"}, {"player-token"}, {"engine", "match"},
		{"loadtest", "games"}, {"loadtest", "clocks"}, {"loadtest", "matchmaking"}, {"loadtest", "ai"},
	} {
		_, errOut, code := palace(append(args, "-h")...)
		if code != exitOK || !strings.Contains(errOut, "Usage of palace "+strings.Join(args, " ")) {
			t.Errorf("palace %s -h: exit %d, stderr %q; want exit 0 and the flags", strings.Join(args, " "), code, errOut)
		}
	}
}

// TestUCIHelp: palace uci takes no flags, but -h, as the usage suggests
// for every command, prints what it does instead of starting an engine
// that waits on stdin without a word; any other argument is refused.
func TestUCIHelp(t *testing.T) {
	for _, h := range []string{"-h", "--help", "help"} {
		out, errOut, code := palace("uci", h)
		if code != exitOK || errOut != "" || !strings.HasPrefix(out, "usage: palace uci") {
			t.Errorf("palace uci %s: exit %d, stdout %q, stderr %q; want exit 0 and the usage on stdout", h, code, out, errOut)
		}
	}
	out, errOut, code := palace("uci", "--threads", "4")
	if code != exitUsage || out != "" || !strings.Contains(errOut, `unexpected argument "--threads"`) {
		t.Errorf("palace uci --threads 4: exit %d, stdout %q, stderr %q; want exit 2 naming the argument", code, out, errOut)
	}
}

// TestStrayArgumentIsNamed: a command that takes flags only names an
// argument it does not take, rather than exit 2 without a word.
func TestStrayArgumentIsNamed(t *testing.T) {
	for _, args := range [][]string{
		{"keygen", "k1"}, {"service-token", "operator"}, {"player-token", "club-7"}, {"health", "localhost:8080"},
		{"engine", "match", "level:1"}, {"loadtest", "games", "games=10"}, {"loadtest", "clocks", "localhost:8080"},
		{"loadtest", "matchmaking", "tickets=10"}, {"loadtest", "ai", "jobs=10"},
	} {
		out, errOut, code := palace(args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, fmt.Sprintf("unexpected argument %q", args[len(args)-1])) {
			t.Errorf("palace %s: exit %d, stdout %q, stderr %q; want exit 2 naming the argument", strings.Join(args, " "), code, out, errOut)
		}
	}
}
