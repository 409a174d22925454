package main

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/auth"
)

// runKeygen prints a new signing key in the id:hexsecret form every
// --*-keys flag takes. Its id starts with the date, so a rotated ring reads
// in order, and ends in random digits, so two keys of one day differ.
func runKeygen(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("palace keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
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
	if *ttl <= 0 || *ttl > 366*24*time.Hour || *caller == "" {
		fmt.Fprintln(stderr, "palace service-token: --ttl must be positive, at most 366 days, and --caller not empty")
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
