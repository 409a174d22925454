package main

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/auth"
	"github.com/palacehq/palace/services/matchmaking"
)

// runKeygen prints a new signing key in the id:hexsecret form every
// --*-keys flag takes. Its id starts with the date, so a rotated ring reads
// in order, and ends in random digits, so two keys of one day differ.
func runKeygen(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("palace keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage of palace keygen:\n  prints a new signing key, id:hexsecret, for --service-keys, --seat-signing-keys or\n  --player-signing-keys (comma-separated, the first signs); it takes no flags.")
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	b := make([]byte, 34)
	if _, err := rand.Read(b); err != nil {
		fmt.Fprintln(stderr, "palace keygen:", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "k%s-%s:%s\n", time.Now().UTC().Format("20060102"), hex.EncodeToString(b[:2]), hex.EncodeToString(b[2:]))
	return exitOK
}

// runServiceToken prints a service credential, for an operator's tool or
// a tournament system that calls the game service's internal RPCs
// (CreateGame) by hand or from its own code.
func runServiceToken(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("palace service-token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var keys string
	app.StringFlag(fs, &keys, "service-keys", "", "the services' --service-keys; the first key signs")
	caller := fs.String("caller", "operator", "who the credential names, for the services' logs")
	ttl := fs.Duration("ttl", time.Hour, "how long the credential is valid")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	// A credential expires on a whole second: one shorter than a second
	// could be printed expired.
	if *ttl < time.Second || *ttl > 366*24*time.Hour || *caller == "" {
		fmt.Fprintln(stderr, "palace service-token: --ttl must be at least 1s (credentials expire on a whole second) and at most 366 days, and --caller not empty")
		return exitUsage
	}
	if keys == "" {
		fmt.Fprintln(stderr, "palace service-token: --service-keys (env PALACE_SERVICE_KEYS) is required")
		return exitUsage
	}
	creds, err := auth.ServiceCredentialsFromKeys(keys, *caller, *ttl)
	if err != nil {
		fmt.Fprintln(stderr, "palace service-token: --service-keys:", err)
		return exitUsage
	}
	tok, err := creds.Token()
	if err != nil {
		fmt.Fprintln(stderr, "palace service-token:", err)
		return exitFail
	}
	fmt.Fprintln(stdout, tok)
	return exitOK
}

// runPlayerToken prints an account credential for a player id of the
// operator's choosing, signed with the player signing keys: for staging
// and tests, and for a tournament system that seats its own players in
// rated play without Google sign-in.
func runPlayerToken(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("palace player-token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var keys string
	app.StringFlag(fs, &keys, "player-signing-keys", "", "matchmaking's --player-signing-keys; the first key signs")
	id := fs.String("player-id", "", "the account's player id (up to 128 bytes; no spaces, braces, commas or '|'; no ':'; not beginning google- or guest-, as sign-ins' ids do, nor \"ai\" or \"me\")")
	name := fs.String("name", "", "the account's display name (1 to 24 printable characters)")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the credential is valid, at most 30 days (matchmaking's default --account-ttl): only rotating the keys voids it sooner")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *ttl < time.Second || *ttl > 30*24*time.Hour {
		fmt.Fprintln(stderr, "palace player-token: --ttl must be at least 1s (credentials expire on a whole second) and at most 30 days")
		return exitUsage
	}
	if err := matchmaking.CheckAccount(*id, *name); err != nil {
		fmt.Fprintln(stderr, "palace player-token:", strings.Replace(strings.Replace(err.Error(), "player_id:", "--player-id:", 1), "nickname:", "--name:", 1))
		return exitUsage
	}
	if keys == "" {
		fmt.Fprintln(stderr, "palace player-token: --player-signing-keys (env PALACE_PLAYER_SIGNING_KEYS) is required")
		return exitUsage
	}
	parsed, err := auth.ParseKeys(keys)
	var ring *auth.Keyring
	if err == nil {
		ring, err = auth.NewKeyring(parsed...)
	}
	if err != nil {
		fmt.Fprintln(stderr, "palace player-token: --player-signing-keys:", err)
		return exitUsage
	}
	now := time.Now()
	tok, err := ring.Sign(auth.Claims{Kind: auth.KindAccount, Subject: *id, Name: strings.TrimSpace(*name), IssuedAt: now.Unix(), ExpiresAt: now.Add(*ttl).Unix()})
	if err != nil {
		fmt.Fprintln(stderr, "palace player-token:", err)
		return exitFail
	}
	fmt.Fprintln(stdout, tok)
	return exitOK
}
