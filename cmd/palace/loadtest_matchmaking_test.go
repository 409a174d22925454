package main

import (
	"strings"
	"testing"

	"github.com/palacehq/palace/pkg/redistest"
)

// playerKeys are matchmaking's --player-signing-keys in the tests that
// start a server, given to the tool too so that it mints its players.
const playerKeys = "lt:" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// TestLoadtestMatchmakingPairsEveryone runs a short matchmaking load test
// against `palace serve` on a real Redis, rated pool included: everyone is
// matched exactly once and the games seat who the tickets say.
func TestLoadtestMatchmakingPairsEveryone(t *testing.T) {
	keys := playerKeys
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
		"--player-signing-keys", keys, "--pairing-interval", "50ms")
	out, errOut, code := palace("loadtest", "matchmaking", "--addr", addr, "--game-addr", addr, "--tickets", "120",
		"--concurrency", "40", "--cancel", "0.2", "--player-signing-keys", keys, "--timeout", "60s",
		// Independent ratings: outliers wait for their window to widen, and
		// must still all be matched.
		"--ratings", "independent")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, out, errOut)
	}
	var rep mmReport
	lastJSON(t, out, &rep)
	if rep.Tickets != 120 || rep.Matched != 120 || rep.Games != 60 || rep.GamesChecked != 60 || len(rep.Pools) != 4 {
		t.Fatalf("report %+v", rep)
	}
	if rep.DoublePaired != 0 || rep.Unmatched != 0 || rep.Unsettled != 0 || rep.Errors != 0 {
		t.Fatalf("faults: %+v\n%s", rep, errOut)
	}
	if rep.Cancelled == 0 || rep.P99ms <= 0 || rep.TicketsPerS <= 0 {
		t.Fatalf("nothing measured: %+v", rep)
	}
}

func TestLoadtestMatchmakingUsage(t *testing.T) {
	for _, args := range [][]string{{"--tickets", "3"}, {"--tickets", "0"}, {"--addr", ""}, {"--rate", "-5"}, {"--timeout", "-1s"},
		{"--concurrency", "2001"}, {"--addr", "127.0.0.1:1,127.0.0.1:2", "--concurrency", "4001"}} {
		if _, _, code := palace(append([]string{"loadtest", "matchmaking"}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want usage", args, code)
		}
	}
}

// TestLoadtestMatchmakingExitsOneWhenNothingEntered: a run that ends
// before any ticket entered matched nobody, and says so: the tickets
// count as unsettled, the exit status is 1 and the rate is that of the
// tickets that entered, none.
func TestLoadtestMatchmakingExitsOneWhenNothingEntered(t *testing.T) {
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	out, errOut, code := palace("loadtest", "matchmaking", "--addr", addr, "--tickets", "20", "--cancel", "0", "--timeout", "1ns")
	var rep mmReport
	lastJSON(t, out, &rep)
	if code != exitFail {
		t.Fatalf("exit %d with report %+v, want %d:\n%s", code, rep, exitFail, errOut)
	}
	if rep.Tickets != 20 || rep.Matched != 0 || rep.Waiting != 0 || rep.Unsettled != 20 || rep.TicketsPerS != 0 {
		t.Fatalf("report %+v, want 20 tickets unsettled and no rate:\n%s", rep, errOut)
	}
}

// TestLoadtestMatchmakingTellsAnUnreadGameFromAWrongPairing: when the
// games cannot be read back, the pairings are not checked, which is an
// error, not a double pairing.
func TestLoadtestMatchmakingTellsAnUnreadGameFromAWrongPairing(t *testing.T) {
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0", "--pairing-interval", "50ms")
	out, errOut, code := palace("loadtest", "matchmaking", "--addr", addr, "--game-addr", "127.0.0.1:1", "--tickets", "8",
		"--cancel", "0", "--timeout", "30s")
	var rep mmReport
	lastJSON(t, out, &rep)
	if code != exitFail || rep.Matched != 8 || rep.DoublePaired != 0 || rep.GamesChecked != 0 || rep.Errors != 4 {
		t.Fatalf("exit %d, report %+v; want 1, 8 matched, none double paired or checked, 4 errors:\n%s", code, rep, errOut)
	}
}

// TestLoadtestMatchmakingMintsItsGuests: a server bounds the guests one
// address creates, so the tool with the signing keys mints its guests,
// and without them it says what to do once it is refused.
func TestLoadtestMatchmakingMintsItsGuests(t *testing.T) {
	keys := playerKeys
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
		"--player-signing-keys", keys, "--pairing-interval", "50ms", "--max-guests-per-hour", "4")
	out, errOut, code := palace("loadtest", "matchmaking", "--addr", addr, "--tickets", "20", "--cancel", "0", "--timeout", "30s")
	if code != exitFail || !strings.Contains(errOut, "your network address (127.0.0.1) made the most allowed, 4 guests") ||
		!strings.Contains(errOut, "give the tool the server's --player-signing-keys") {
		t.Fatalf("without the keys: exit %d, want %d and the way out:\n%s", code, exitFail, errOut)
	}
	// Even so, the last line is the report: the players not made are its
	// errors.
	var refused mmReport
	lastJSON(t, out, &refused)
	if refused.Tickets != 20 || refused.Errors != 16 {
		t.Fatalf("without the keys: report %+v, want 20 tickets and 16 errors", refused)
	}
	out, errOut, code = palace("loadtest", "matchmaking", "--addr", addr, "--game-addr", addr, "--tickets", "20", "--cancel", "0",
		"--player-signing-keys", keys, "--timeout", "60s")
	var rep mmReport
	lastJSON(t, out, &rep)
	if code != 0 || rep.Matched != 20 || rep.GamesChecked != 10 || rep.Errors != 0 {
		t.Fatalf("with the keys: exit %d, report %+v:\n%s", code, rep, errOut)
	}
}

// TestLoadtestMatchmakingRidesOutConnectionRenewals: a server renewing
// its connections often cuts each waiting ticket's watch many times; the
// tool opens it again at once, as an app does, and counts no failure.
func TestLoadtestMatchmakingRidesOutConnectionRenewals(t *testing.T) {
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
		"--player-signing-keys", playerKeys, "--pairing-interval", "50ms",
		"--max-connection-age", "20ms", "--max-connection-age-grace", "20ms")
	// One ticket every 10.5 s: the first waits that long for its partner,
	// through more renewals than failures are allowed (grpc-go closes a
	// connection a second after its age and grace, once its client has
	// not closed it first).
	out, errOut, code := palace("loadtest", "matchmaking", "--addr", addr, "--tickets", "2", "--rate", "0.095",
		"--cancel", "0", "--player-signing-keys", playerKeys, "--timeout", "60s")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, out, errOut)
	}
	var rep mmReport
	lastJSON(t, out, &rep)
	if rep.Matched != 2 || rep.Errors != 0 || rep.Unsettled != 0 {
		t.Fatalf("report %+v\n%s", rep, errOut)
	}
	if rep.Rewatched <= rewatches {
		t.Fatalf("%d watches opened again, want more than the %d failures allowed one ticket: %+v", rep.Rewatched, rewatches, rep)
	}
}
