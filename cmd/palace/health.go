package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/server"
)

// runHealth checks a server's gRPC health, for container health checks
// where no grpcurl or grpc_health_probe is installed.
func runHealth(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("palace health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "localhost:8080", "server host:port")
	service := fs.String("service", "", "health service name, e.g. palace.game.v1.GameService; empty: the whole server")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for an answer")
	tlsMode := fs.String("tls", "", "check a server that serves TLS against CA certificates: system for the system's roots, or a PEM file of the CA certificates that sign its certificate")
	serverName := fs.String("tls-server-name", "", "with --tls, the name its certificate must hold (default: the host of --addr)")
	var ownCert string
	app.StringFlag(fs, &ownCert, "tls-cert", "", "the server's own certificate file, for a check that runs beside it (its container or pod, where the server's PALACE_TLS_CERT is set): exactly that certificate is accepted, whatever names it holds; ignored with --tls")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *timeout <= 0 {
		// It could only time out: a check that always fails, read as the
		// server's.
		fmt.Fprintf(stderr, "palace health: --timeout %v: must be positive\n", *timeout)
		return exitUsage
	}
	creds, err := healthCredentials(*tlsMode, *serverName, ownCert)
	if err != nil {
		fmt.Fprintln(stderr, "palace health:", err)
		return exitUsage
	}
	cc, err := grpc.NewClient(*addr, append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, withTLSHint(creds)...)...)
	if err != nil {
		fmt.Fprintln(stderr, "palace health:", err)
		return exitUsage
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: *service})
	if err != nil {
		fmt.Fprintln(stderr, "palace health:", err)
		return exitFail
	}
	fmt.Fprintln(stdout, resp.GetStatus())
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return exitFail
	}
	return exitOK
}

// healthCredentials: against CA certificates with --tls, pinned to the
// server's own certificate with --tls-cert, else plaintext.
func healthCredentials(tlsMode, serverName, ownCert string) (credentials.TransportCredentials, error) {
	switch {
	case tlsMode != "":
		creds, err := tlsCredentials(tlsMode, serverName)
		if err != nil {
			return nil, fmt.Errorf("--tls: %w", err)
		}
		return creds, nil
	case ownCert != "":
		cfg, err := server.PinnedTLS(ownCert)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert: %w", err)
		}
		return credentials.NewTLS(cfg), nil
	}
	return insecure.NewCredentials(), nil
}
