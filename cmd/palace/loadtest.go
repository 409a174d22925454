package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/auth"
)

const loadtestUsage = `usage: palace loadtest <games|clocks|matchmaking|ai> --addr ADDR [flags]

Each load test prints progress lines while it runs and, as its LAST line,
one JSON object with its figures. Run "palace loadtest <test> -h" for a
test's flags.
`

func runLoadtest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, loadtestUsage)
		return exitUsage
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, loadtestUsage)
		return exitOK
	}
	// A load generator should spend the machine on the server, not on its
	// own garbage: at the default GOGC the games load test spent about a
	// quarter of its CPU in the collector, CPU the server it measures
	// shares on one machine. GOGC, when set, wins.
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400))
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

// transport is how a load tool reaches the servers: in plaintext, as on
// loopback or inside a cluster, or over TLS, as through a deployment's
// public address, whose TLS costs belong in what is measured.
type transport struct {
	creds credentials.TransportCredentials
}

// transportFlags defines --tls and --tls-server-name on a load tool; the
// returned function reads them once the flags are parsed.
func transportFlags(fs *flag.FlagSet) func() (transport, error) {
	mode := fs.String("tls", "", "reach the servers over TLS, checked against CA certificates: system for the system's roots, or a PEM file of the CA certificates that sign theirs; empty: plaintext")
	serverName := fs.String("tls-server-name", "", "with --tls, the name the servers' certificates must hold (default: the host of each address)")
	return func() (transport, error) {
		if *mode == "" {
			if *serverName != "" {
				return transport{}, errors.New("--tls-server-name needs --tls")
			}
			return transport{creds: insecure.NewCredentials()}, nil
		}
		creds, err := tlsCredentials(*mode, *serverName)
		if err != nil {
			return transport{}, fmt.Errorf("--tls: %w", err)
		}
		return transport{creds: creds}, nil
	}
}

// tlsCredentials checks a server's certificate against the CA certificates
// of mode (system, or a PEM file) and, when serverName is set, for that
// name instead of the dialled host's.
func tlsCredentials(mode, serverName string) (credentials.TransportCredentials, error) {
	cfg, err := app.PeerTLSConfig(mode)
	if err != nil {
		return nil, err
	}
	cfg.ServerName = serverName
	return credentials.NewTLS(cfg), nil
}

// dial connects a load tool to one server.
func (tr transport) dial(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	base := append([]grpc.DialOption{grpc.WithTransportCredentials(tr.creds)}, withTLSHint(tr.creds)...)
	return grpc.NewClient(addr, append(base, opts...)...)
}

// serviceKeysFlag defines --service-keys on a load tool that creates
// games, which only Palace services and operators may do.
// finiteFlag defines a load tool's float flag, finite only: a NaN rate
// passes every range check and then means nothing.
func finiteFlag(fs *flag.FlagSet, name string, def float64, usage string) *float64 {
	p := new(float64)
	app.FiniteFloatVar(fs, p, name, def, usage)
	return p
}

func serviceKeysFlag(fs *flag.FlagSet) *string {
	var keys string
	app.StringFlag(fs, &keys, "service-keys", "", "the game service's --service-keys: this tool creates games, an internal call, so it signs a service credential with them")
	return &keys
}

// asService is the dial option that presents a service credential
// signed with keys, as Palace's own services do.
func asService(keys, tool string) (grpc.DialOption, error) {
	if strings.TrimSpace(keys) == "" {
		return nil, errors.New("--service-keys (env PALACE_SERVICE_KEYS) is required: creating games is an internal call; give this tool the keys the game service was started with")
	}
	creds, err := auth.ServiceCredentialsFromKeys(keys, tool, time.Hour)
	if err != nil {
		return nil, fmt.Errorf("--service-keys: %w", err)
	}
	return grpc.WithPerRPCCredentials(creds), nil
}

// replicaAddrs lists the addresses of a comma-separated --addr, for load
// tools that spread their clients over replicas.
func replicaAddrs(addrs string) []string {
	var out []string
	for a := range strings.SplitSeq(addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// runEnded reports whether err only says that the run's time is up: gRPC's
// own deadline timer can fire just before the context reports its end, so
// checking ctx.Err() alone would count that as a failure. A call's own
// timeout (--call-timeout) ending it well before the run's end is a
// failure.
func runEnded(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	deadline, ok := ctx.Deadline()
	return ok && status.Code(err) == codes.DeadlineExceeded && time.Until(deadline) < runEndSlack
}

// runEndSlack is how long before the run's end a call's DeadlineExceeded
// is still taken for the run's end.
const runEndSlack = 100 * time.Millisecond
