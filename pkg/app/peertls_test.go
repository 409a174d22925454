package app

import (
	"context"
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/palacehq/palace/pkg/tlstest"
)

// runProcess runs a process without services with the given flags and
// returns its runtime once it serves; it stops when the test ends.
func runProcess(t *testing.T, args ...string) *Runtime {
	t.Helper()
	var cfg Config
	cfg.NoRedis = true
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.RegisterFlags(fs, "127.0.0.1:0")
	if err := fs.Parse(append([]string{"--log-level", "error"}, args...)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rtc := make(chan *Runtime, 1)
	var rt *Runtime
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{
			Name: "test", Config: cfg, LogOutput: io.Discard,
			Services:  []Binder{func(_ context.Context, r *Runtime) (func() error, error) { rt = r; return nil, nil }},
			OnServing: func(string) { rtc <- rt },
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case rt := <-rtc:
		return rt
	case err := <-done:
		t.Fatalf("process with %v did not serve: %v", args, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("process with %v did not serve within 10s", args)
	}
	return nil
}

// health checks the server at target through rt.Dial.
func health(rt *Runtime, target string) error {
	cc, err := rt.Dial(target)
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// A process reaches another's TLS port with --peer-tls naming the CA that
// signed its certificate, and not in plaintext or with only the system's
// roots; it reaches its own TLS port without --peer-tls.
func TestPeerTLS(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	tlstest.WriteCert(t, certPath, keyPath, "peer")
	server := runProcess(t, "--tls-cert", certPath, "--tls-key", keyPath)

	if err := health(server, ""); err != nil {
		t.Errorf("own TLS port: %v", err)
	}
	if err := health(runProcess(t, "--peer-tls", certPath), server.Addr); err != nil {
		t.Errorf("--peer-tls with the CA: %v", err)
	}
	for _, peer := range []string{"", "system"} {
		if err := health(runProcess(t, "--peer-tls", peer), server.Addr); err == nil {
			t.Errorf("--peer-tls %q reached a TLS port whose certificate it cannot check", peer)
		}
	}
	if _, err := PeerCredentials(keyPath); err == nil {
		t.Error("--peer-tls took a file without a certificate")
	}
}

// --peer-tls is about other processes: one that serves plaintext reaches
// its own port in plaintext whatever it says, and one that calls no other
// service starts with a CA file that is not there (a settings block
// shared by every process); a call to another process then fails.
func TestPeerTLSIsForOtherProcesses(t *testing.T) {
	dir := t.TempDir()
	certPath := filepath.Join(dir, "tls.crt")
	tlstest.WriteCert(t, certPath, filepath.Join(dir, "tls.key"), "peer")
	if err := health(runProcess(t, "--peer-tls", certPath), ""); err != nil {
		t.Errorf("own plaintext port with --peer-tls: %v", err)
	}
	missing := runProcess(t, "--peer-tls", filepath.Join(dir, "none.pem"))
	if err := health(missing, ""); err != nil {
		t.Errorf("own port with a --peer-tls file that is not there: %v", err)
	}
	if _, err := missing.Dial("127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "--peer-tls") {
		t.Errorf("a call to another process with a --peer-tls file that is not there: %v", err)
	}
}
