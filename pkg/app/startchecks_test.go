package app_test

import (
	"context"
	"flag"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/palacehq/palace/pkg/app"
)

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// TestBadListenAndTLSFlagsAreReportedBeforeWaitingForRedis: a malformed
// --listen (the usual slip: a bare port) or TLS files that do not exist
// are reported at once, not after --redis-wait with Redis out of reach.
func TestBadListenAndTLSFlagsAreReportedBeforeWaitingForRedis(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"listen without a host", []string{"--listen", "8080"}, "8080"},
		{"TLS files that do not exist", []string{"--listen", "127.0.0.1:0", "--tls-cert", missing, "--tls-key", missing}, "missing.pem"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var cfg app.Config
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			cfg.RegisterFlags(fs, "127.0.0.1:0")
			if err := fs.Parse(append(tt.args, "--redis-addr", deadAddr(t), "--redis-wait", "1m")); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			begun := time.Now()
			err := app.Run(ctx, app.Options{Name: "test", Config: cfg, LogOutput: io.Discard})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run with %v and Redis out of reach: after %v: %v; want the bad flag (%q) named at once",
					tt.args, time.Since(begun).Round(100*time.Millisecond), err, tt.want)
			}
		})
	}
}

// TestNegativeRedisWaitIsRefused: as every other duration of Config.
func TestNegativeRedisWaitIsRefused(t *testing.T) {
	t.Setenv("PALACE_REDIS_WAIT", "-1s")
	var cfg app.Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.RegisterFlags(fs, "127.0.0.1:0")
	if err := fs.Parse([]string{"--redis-addr", "127.0.0.1:6379"}); err != nil {
		t.Fatal(err)
	}
	if cfg.RedisWait != -time.Second {
		t.Fatalf("PALACE_REDIS_WAIT not applied: %v", cfg.RedisWait)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--redis-wait") {
		t.Fatalf("Validate() with --redis-wait -1s = %v; want it refused", err)
	}
}

// TestAMalformedRedisURLFailsAtOnce: a redis:// URL listing two hosts
// cannot be reached however long the process waits, so it is refused at
// once rather than retried for --redis-wait.
func TestAMalformedRedisURLFailsAtOnce(t *testing.T) {
	var cfg app.Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.RegisterFlags(fs, "127.0.0.1:0")
	if err := fs.Parse([]string{"--listen", "127.0.0.1:0", "--redis-addr", "redis://127.0.0.1:6379,127.0.0.1:6380", "--redis-wait", "1m"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	begun := time.Now()
	err := app.Run(ctx, app.Options{Name: "test", Config: cfg, LogOutput: io.Discard})
	if waited := time.Since(begun); err == nil || waited > 2*time.Second {
		t.Fatalf("Run with --redis-addr redis://h1,h2: %v after %v; want it refused at once", err, waited.Round(100*time.Millisecond))
	}
}

// traceCollector is an OTLP/gRPC trace collector that counts the spans it
// is sent.
type traceCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	spans atomic.Int64
}

func (c *traceCollector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			c.spans.Add(int64(len(ss.GetSpans())))
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TestOTLPEndpointTakesAURL: --otlp-endpoint takes host:port and the URL
// form of OpenTelemetry's own OTEL_EXPORTER_OTLP_ENDPOINT
// (http://collector:4317); both export the process's spans.
func TestOTLPEndpointTakesAURL(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &traceCollector{}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, col)
	go gs.Serve(lis)
	defer gs.Stop()
	collector := lis.Addr().String()

	for _, endpoint := range []string{collector, "http://" + collector} {
		t.Run(endpoint, func(t *testing.T) {
			before := col.spans.Load()
			cfg := app.Config{NoRedis: true}
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			cfg.RegisterFlags(fs, "127.0.0.1:0")
			if err := fs.Parse([]string{"--otlp-endpoint", endpoint, "--otlp-flush-timeout", "2s", "--shutdown-timeout", "2s"}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			var callErr error
			err := app.Run(ctx, app.Options{Name: "test", Config: cfg, LogOutput: io.Discard, OnServing: func(addr string) {
				go func() {
					defer cancel()
					cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
					if err != nil {
						callErr = err
						return
					}
					defer cc.Close()
					for range 3 {
						if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
							callErr = err
							return
						}
					}
				}()
			}})
			if callErr != nil {
				t.Fatalf("health call: %v", callErr)
			}
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := col.spans.Load() - before; got == 0 {
				t.Fatalf("--otlp-endpoint %q: the process served and stopped, and the collector got no span", endpoint)
			}
		})
	}
}

// TestOTLPEndpointsRefused: an endpoint the exporter would take and export
// nothing to is refused at start, naming the flag.
func TestOTLPEndpointsRefused(t *testing.T) {
	for _, endpoint := range []string{"collector", "collector:", "grpc://collector:4317", "http://collector", "http://collector:4317/v1/traces", "https://u:p@collector:4317", "collector:4317?token=t", "collector:4317#t"} {
		cfg := app.Config{NoRedis: true}
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		cfg.RegisterFlags(fs, "127.0.0.1:0")
		if err := fs.Parse([]string{"--otlp-endpoint", endpoint}); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--otlp-endpoint") {
			t.Errorf("Validate() with --otlp-endpoint %q = %v; want it refused", endpoint, err)
		}
	}
}
