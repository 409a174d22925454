package server

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/palacehq/palace/pkg/telemetry"
	"github.com/palacehq/palace/pkg/tlstest"
)

func tlsHealth(ctx context.Context, addr string, creds credentials.TransportCredentials) (healthpb.HealthCheckResponse_ServingStatus, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return 0, err
	}
	defer cc.Close()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return resp.GetStatus(), err
}

// With a certificate, the one port serves every client kind over TLS
// (native gRPC, Connect over HTTP/1.1 and HTTP/2, plain HTTP), refuses
// plaintext, and serves a renewed certificate to new connections without
// a restart.
func TestTLSServesEveryClient(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first := tlstest.WriteCert(t, certPath, keyPath, "first")
	addr, _ := startServerWith(t, Config{TLSCertFile: certPath, TLSKeyFile: keyPath})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if st, err := tlsHealth(ctx, addr, credentials.NewTLS(&tls.Config{RootCAs: first})); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC over TLS: %v %v", st, err)
	}
	for name, set := range map[string]func(*http.Protocols){
		"http1": func(p *http.Protocols) { p.SetHTTP1(true) },
		"h2":    func(p *http.Protocols) { p.SetHTTP2(true) },
	} {
		var p http.Protocols
		set(&p)
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Protocols: &p, TLSClientConfig: &tls.Config{RootCAs: first}}}
		req, err := http.NewRequest(http.MethodPost, "https://"+addr+"/grpc.health.v1.Health/Check", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range connectJSON {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: Connect over TLS: %v", name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "SERVING") || resp.Proto != map[string]string{"http1": "HTTP/1.1", "h2": "HTTP/2.0"}[name] {
			t.Fatalf("%s: Connect over TLS: %s %d %q", name, resp.Proto, resp.StatusCode, body)
		}
		resp, err = c.Get("https://" + addr + "/metrics")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: /metrics over TLS: %v %v", name, resp, err)
		}
		resp.Body.Close()
	}

	// A plaintext client gets no answer at all.
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	if _, err := tlsHealth(short, addr, insecure.NewCredentials()); err == nil {
		t.Error("a plaintext gRPC call to a TLS port was answered")
	}
	cancelShort()
	// A plaintext HTTP request is told what is wrong.
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("a plaintext HTTP request to a TLS port: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "serves TLS") {
		t.Errorf("a plaintext HTTP request to a TLS port: %d %q", resp.StatusCode, body)
	}

	// A renewal: new connections get the new certificate once the server
	// has looked at its files again.
	second := tlstest.WriteCert(t, certPath, keyPath, "second")
	deadline := time.Now().Add(certRecheck + 10*time.Second)
	for {
		st, err := tlsHealth(ctx, addr, credentials.NewTLS(&tls.Config{RootCAs: second}))
		if err == nil && st == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the renewed certificate was not served within %v: %v", certRecheck+10*time.Second, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := tlsHealth(ctx, addr, credentials.NewTLS(&tls.Config{RootCAs: first})); err == nil {
		t.Error("the replaced certificate is still served")
	}
}

// A process's calls to its own TLS port accept its own certificate alone,
// whatever names it holds, and no other.
func TestSelfTLSAcceptsOnlyOurCertificate(t *testing.T) {
	dir := t.TempDir()
	ours := [2]string{filepath.Join(dir, "a.crt"), filepath.Join(dir, "a.key")}
	theirs := [2]string{filepath.Join(dir, "b.crt"), filepath.Join(dir, "b.key")}
	tlstest.WriteCert(t, ours[0], ours[1], "ours")
	tlstest.WriteCert(t, theirs[0], theirs[1], "theirs")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	self, err := loadCertFiles(ours[0], ours[1], slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := startServerWith(t, Config{TLSCertFile: ours[0], TLSKeyFile: ours[1]})
	if st, err := tlsHealth(ctx, addr, credentials.NewTLS(self.selfConfig())); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("own port: %v %v", st, err)
	}
	other, _ := startServerWith(t, Config{TLSCertFile: theirs[0], TLSKeyFile: theirs[1]})
	if _, err := tlsHealth(ctx, other, credentials.NewTLS(self.selfConfig())); err == nil {
		t.Fatal("a port serving another certificate was accepted as our own")
	}
}

func TestTLSConfigIsChecked(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	tlstest.WriteCert(t, certPath, keyPath, "x")
	otherKey := filepath.Join(dir, "other.key")
	tlstest.WriteCert(t, filepath.Join(dir, "other.crt"), otherKey, "y")

	tel, err := telemetry.New(context.Background(), telemetry.Config{ServiceName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := (Config{Listen: "127.0.0.1:0", TLSCertFile: certPath}).Validate(); err == nil {
		t.Error("a certificate without a key passed")
	}
	for name, cfg := range map[string]Config{
		"missing file":   {TLSCertFile: filepath.Join(dir, "nope.crt"), TLSKeyFile: keyPath},
		"key of another": {TLSCertFile: certPath, TLSKeyFile: otherKey},
	} {
		cfg.Listen = "127.0.0.1:0"
		if lis, err := New(cfg, slog.New(slog.DiscardHandler), tel).Listen(); err == nil {
			lis.Close()
			t.Errorf("%s: Listen took it", name)
		}
	}
}

// The port refuses TLS before 1.2, whose handshakes and ciphers are
// broken, and takes 1.2 and 1.3.
func TestTLSRefusesVersionsBefore12(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	pool := tlstest.WriteCert(t, certPath, keyPath, "x")
	certs, err := loadCertFiles(certPath, keyPath, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for v, ok := range map[uint16]bool{tls.VersionTLS10: false, tls.VersionTLS11: false, tls.VersionTLS12: true, tls.VersionTLS13: true} {
		server, client := net.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- tls.Server(server, certs.serverConfig()).Handshake()
			server.Close()
		}()
		err := tls.Client(client, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: v, MaxVersion: v}).Handshake()
		client.Close()
		<-done
		if (err == nil) != ok {
			t.Errorf("%s: handshake %v, want accepted %v", tls.VersionName(v), err, ok)
		}
	}
}

// A renewal caught half-written is not served: the certificate loaded
// before is, until the files make a valid pair again.
func TestHalfWrittenRenewalKeepsTheCertificate(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	tlstest.WriteCert(t, certPath, keyPath, "first")
	certs, err := loadCertFiles(certPath, keyPath, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	first := certs.current()
	if err := os.WriteFile(certPath, []byte("-----BEGIN CERTIFICATE-----\nMIIB"), 0o600); err != nil {
		t.Fatal(err)
	}
	certs.checked = time.Time{} // due for a look
	if got := certs.current(); got != first {
		t.Fatalf("half-written files: serving %v, want the certificate loaded before", got)
	}
	tlstest.WriteCert(t, certPath, keyPath, "second")
	certs.checked = time.Time{}
	if got := certs.current(); got == first || got == nil || got.Leaf.Subject.CommonName != "second" {
		t.Fatalf("the finished renewal is not served: %v", got)
	}
}
