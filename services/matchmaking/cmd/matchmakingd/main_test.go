package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestRunNeedsTheGameService: without --game-addr the daemon would call
// itself for the game service, and fail every call while looking healthy.
func TestRunNeedsTheGameService(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := run(ctx, []string{"--listen", "127.0.0.1:0", "--redis-addr", "127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "--game-addr") {
		t.Fatalf("run without --game-addr: %v, want an error naming --game-addr", err)
	}
}

// TestBadPlayerKeysAreReportedBeforeWaitingForRedis: a malformed player
// key is reported at once, naming its flag, not hidden behind a Redis out
// of reach until --redis-wait has passed; so is a --peer-tls naming no
// file, which waited for Redis, read only at the first call.
func TestBadPlayerKeysAreReportedBeforeWaitingForRedis(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	for _, bad := range [][]string{{"--player-signing-keys", "k1:00ff"}, {"--peer-tls", "/nonexistent/ca.pem"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		begun := time.Now()
		err = run(ctx, append([]string{"--listen", "127.0.0.1:0", "--redis-addr", dead, "--redis-wait", "1m", "--game-addr", "127.0.0.1:1", "--log-level", "error"}, bad...))
		cancel()
		if err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Fatalf("matchmakingd with %v, Redis out of reach: after %v: %v; want %s named at once", bad, time.Since(begun).Round(100*time.Millisecond), err, bad[0])
		}
	}
}

// A missing --game-addr was reported alone, checked before the other
// flags: those were named only once it was given.
func TestRunNamesAMissingGameServiceBesideOtherBadFlags(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := run(ctx, []string{"--listen", "127.0.0.1:0", "--redis-addr", "127.0.0.1:1", "--redis-wait", "0s",
		"--ticket-ttl", "-1s", "--log-level", "bogus"})
	for _, flag := range []string{"--game-addr", "--ticket-ttl", "--log-level"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("matchmakingd with several bad flags: %v\nwant %s named too", err, flag)
		}
	}
}

// TestABadPeerTLSIsNamedBesideOtherBadFlags: matchmakingd calls the game
// service with --peer-tls, which was read only at the first call: a
// --peer-tls naming no readable CA file was not named beside another bad
// flag, and with Redis out of reach not at all (the process waited
// --redis-wait for Redis, then reported only Redis).
func TestABadPeerTLSIsNamedBesideOtherBadFlags(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err = run(ctx, []string{"--listen", "127.0.0.1:0", "--redis-addr", dead, "--redis-wait", "1m", "--game-addr", "127.0.0.1:1", "--log-level", "error",
		"--peer-tls", "/nonexistent/ca.pem", "--ticket-ttl", "-1s"})
	for _, flag := range []string{"--ticket-ttl", "--peer-tls"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("matchmakingd with a bad --peer-tls and a bad --ticket-ttl: %v\nwant %s named", err, flag)
		}
	}
}

// TestABadListenAndTLSFilesAreNamedBesideOtherBadFlags: a malformed
// --listen or TLS files that do not exist were found by the listen, after
// the checks: beside another bad flag they were not named, and took a
// restart of their own to find.
func TestABadListenAndTLSFilesAreNamedBesideOtherBadFlags(t *testing.T) {
	missing := t.TempDir() + "/missing.pem"
	for _, tt := range []struct {
		name, want string
		args       []string
	}{
		{"listen without a host", "8080", []string{"--listen", "8080"}},
		{"TLS files that do not exist", "missing.pem", []string{"--listen", "127.0.0.1:0", "--tls-cert", missing, "--tls-key", missing}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			err := run(ctx, append(tt.args, "--redis-addr", "127.0.0.1:1", "--redis-wait", "0s", "--game-addr", "127.0.0.1:1", "--log-level", "error",
				"--ticket-ttl", "-1s"))
			for _, want := range []string{"--ticket-ttl", tt.want} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("matchmakingd with %v and --ticket-ttl -1s: %v\nwant %q named", tt.args, err, want)
				}
			}
		})
	}
}

// TestARefusedEnvironmentValueIsNamedBesideOtherBadFlags: a PALACE_*
// value its flag refused was returned by ParseFlags alone, before the
// checks ran, though palace serve named it beside every other bad flag.
func TestARefusedEnvironmentValueIsNamedBesideOtherBadFlags(t *testing.T) {
	t.Setenv("PALACE_TICKET_TTL", "10")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := run(ctx, []string{"--listen", "127.0.0.1:0", "--redis-addr", "127.0.0.1:1", "--redis-wait", "0s", "--log-level", "bogus"})
	for _, want := range []string{"PALACE_TICKET_TTL", "--log-level", "--game-addr"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("matchmakingd with PALACE_TICKET_TTL=10, --log-level bogus and no --game-addr: %v\nwant %q named", err, want)
		}
	}
}

// TestABadCommandLineValueIsNamedBesideOtherBadFlags: a command-line value
// its flag's parser refused (--ticket-ttl 10, the unit forgotten) stopped
// the parse and was reported alone: the refused PALACE_MAX_RECV_BYTES,
// the bad --log-level, the missing --game-addr and the bad --peer-tls each
// took a restart of their own to find.
func TestABadCommandLineValueIsNamedBesideOtherBadFlags(t *testing.T) {
	t.Setenv("PALACE_MAX_RECV_BYTES", "1MiB")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := run(ctx, []string{"--listen", "127.0.0.1:0", "--redis-addr", "127.0.0.1:1", "--redis-wait", "0s",
		"--log-level", "bogus", "--peer-tls", "/nonexistent/ca.pem", "--ticket-ttl", "10"})
	for _, want := range []string{"ticket-ttl", `PALACE_MAX_RECV_BYTES="1MiB"`, "--log-level", "--game-addr", "--peer-tls"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("matchmakingd with --ticket-ttl 10 and other bad flags: %v\nwant %q named", err, want)
		}
	}
}

// TestABadCommandLineValueIsWrittenOnce: run wrote a refused command-line
// value to stderr (flag's own output, followed by every flag's usage), and
// main wrote the error it returns again: the operator read the same
// message twice, a screen of usage apart.
func TestABadCommandLineValueIsWrittenOnce(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	err = run(context.Background(), []string{"--listen", "127.0.0.1:0", "--redis-addr", "127.0.0.1:1", "--game-addr", "127.0.0.1:1", "--ticket-ttl", "10"})
	os.Stderr = saved
	w.Close()
	written, _ := io.ReadAll(r)
	// What main does with the error run returns.
	all := string(written) + "matchmakingd: " + fmt.Sprint(err) + "\n"
	const msg = `"10"`
	if n := strings.Count(all, msg); n != 1 || strings.Contains(all, "Usage of") {
		t.Errorf("matchmakingd --ticket-ttl 10 writes %q %d times to stderr (%d lines in all); want once, without the usage", msg, n, strings.Count(all, "\n"))
	}
}
