package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/palacehq/palace/pkg/app"
)

// runHealth checks a server's gRPC health, for container health checks
// where no grpcurl or grpc_health_probe is installed.
func runHealth(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("palace health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "localhost:8080", "server host:port")
	service := fs.String("service", "", "health service name, e.g. palace.game.v1.GameService; empty: the whole server")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for an answer")
	tlsMode := fs.String("tls", "", "the server's TLS (--tls-cert): empty for plaintext, system to check its certificate against the system's roots, or a PEM file of the CA certificates that sign it")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	creds, err := app.PeerCredentials(*tlsMode)
	if err != nil {
		fmt.Fprintln(stderr, "palace health: --tls:", err)
		return exitUsage
	}
	cc, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(creds))
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
