package telemetry

import (
	"bytes"
	"context"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/tlstest"
)

// TestAPlaintextEndpointIsPlaintextWhateverTheCertificateVariables: an
// http:// endpoint, or a host:port with --otlp-insecure, is plaintext
// whatever the OTEL_EXPORTER_OTLP_* variables say. A CA file given in
// OTEL_EXPORTER_OTLP_CERTIFICATE (or TRACES_CERTIFICATE) made the exporter
// speak TLS to it (its credentials outrank the insecure option): a
// plaintext collector got a ClientHello and no span.
func TestAPlaintextEndpointIsPlaintextWhateverTheCertificateVariables(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	tlstest.WriteCert(t, ca, filepath.Join(t.TempDir(), "ca.key"), "ca")
	for _, env := range []string{"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"} {
		t.Run(env+"/http URL", func(t *testing.T) {
			t.Setenv(env, ca)
			b := firstBytesSent(t, func(a string) string { return "http://" + a }, false)
			if !bytes.HasPrefix(b, []byte("PRI *")) {
				t.Fatalf("--otlp-endpoint http://... with %s set: first bytes %q (TLS ClientHello: %v), want the HTTP/2 plaintext preface", env, b, isTLSHello(b))
			}
		})
		t.Run(env+"/host:port insecure", func(t *testing.T) {
			t.Setenv(env, ca)
			b := firstBytesSent(t, func(a string) string { return a }, true)
			if !bytes.HasPrefix(b, []byte("PRI *")) {
				t.Fatalf("--otlp-endpoint host:port --otlp-insecure=true with %s set: first bytes %q (TLS ClientHello: %v), want the HTTP/2 plaintext preface", env, b, isTLSHello(b))
			}
		})
	}
}

// TestAHostPortIsTLSWithoutInsecureWhateverTheEnvironment: a host:port
// endpoint is "TLS unless PALACE_OTLP_INSECURE" (deploy/README.md). With
// --otlp-insecure=false, an OTEL_EXPORTER_OTLP_INSECURE=true (or an http://
// OTEL_EXPORTER_OTLP_ENDPOINT) left in the environment sent the spans, and
// the OTEL_EXPORTER_OTLP_HEADERS credentials, in plaintext.
func TestAHostPortIsTLSWithoutInsecureWhateverTheEnvironment(t *testing.T) {
	for _, env := range [][2]string{
		{"OTEL_EXPORTER_OTLP_INSECURE", "true"},
		{"OTEL_EXPORTER_OTLP_TRACES_INSECURE", "true"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://elsewhere:4317"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://elsewhere:4317"},
	} {
		t.Run(env[0], func(t *testing.T) {
			t.Setenv(env[0], env[1])
			t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20s3cr3t")
			b := firstBytesSent(t, func(a string) string { return a }, false)
			if !isTLSHello(b) {
				t.Fatalf("--otlp-endpoint host:port --otlp-insecure=false with %s=%s: first bytes %q (HTTP/2 plaintext preface: %v), want a TLS ClientHello", env[0], env[1], b, bytes.HasPrefix(b, []byte("PRI *")))
			}
		})
	}
}

// TestAHostNamedLikeAGRPCSchemeIsDialedAsAHost: CheckEndpoint takes
// host:port "unix-abstract:41234" (or "unix:4317", "dns:4317",
// "passthrough:4317", and their http:// URLs) and shows it as such. gRPC
// was handed the bare host:port, which it reads as a target URL of scheme
// "unix-abstract" (a resolver it has): the spans went to the abstract Unix
// socket "@41234", not to TCP port 41234 of host "unix-abstract".
func TestAHostNamedLikeAGRPCSchemeIsDialedAsAHost(t *testing.T) {
	port := 20000 + mrand.IntN(40000)
	lis, err := net.Listen("unix", fmt.Sprintf("@%d", port))
	if err != nil {
		t.Fatal(err)
	}
	e := fmt.Sprintf("unix-abstract:%d", port)
	if err := CheckEndpoint(e); err != nil {
		t.Fatalf("CheckEndpoint(%q) = %v", e, err)
	}
	if b, ok := firstBytesOn(t, lis, e, true, 2500*time.Millisecond); ok {
		t.Fatalf("--otlp-endpoint %q (shown %q: host unix-abstract, TCP port %d) sent %q to the abstract Unix socket @%d", e, RedactEndpoint(e), port, b, port)
	}
}

// firstBytesSent starts an export of one span to a raw listener given as
// --otlp-endpoint (in the form made by mk) and returns the first bytes
// the exporter wrote on the connection.
func firstBytesSent(t *testing.T, mk func(addr string) string, insecure bool) []byte {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b, ok := firstBytesOn(t, lis, mk(lis.Addr().String()), insecure, 6*time.Second)
	if !ok {
		t.Fatal("the exporter never connected")
	}
	return b
}

// firstBytesOn starts an export of one span to endpoint and returns the
// first bytes the exporter wrote on a connection to lis within wait, if
// it made one.
func firstBytesOn(t *testing.T, lis net.Listener, endpoint string, insecure bool, wait time.Duration) ([]byte, bool) {
	t.Helper()
	defer lis.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 5)
		n, _ := io.ReadFull(c, b)
		got <- b[:n]
	}()
	tel, err := New(context.Background(), Config{ServiceName: "test", OTLPEndpoint: endpoint, OTLPInsecure: insecure})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tel.Tracer.Tracer("t").Start(context.Background(), "s")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	go func() { _ = tel.Shutdown(ctx) }()
	select {
	case b := <-got:
		return b, true
	case <-time.After(wait):
		return nil, false
	}
}

func isTLSHello(b []byte) bool { return len(b) >= 3 && b[0] == 0x16 && b[1] == 0x03 }

// TestAURLsSchemeChoosesTLSWhateverTheEnvironment: an https://
// --otlp-endpoint is TLS, an http:// one plaintext, whatever
// OTEL_EXPORTER_OTLP_* variables (read by the exporter first) and
// --otlp-insecure say. Giving the exporter the target alone, to escape an
// IPv6 zone, let OTEL_EXPORTER_OTLP_INSECURE=true (or an http://
// OTEL_EXPORTER_OTLP_ENDPOINT left in the environment) send the spans of
// an https endpoint in plaintext.
func TestAURLsSchemeChoosesTLSWhateverTheEnvironment(t *testing.T) {
	https := func(a string) string { return "https://" + a }
	t.Run("no env", func(t *testing.T) {
		if b := firstBytesSent(t, https, true); !isTLSHello(b) {
			t.Fatalf("https endpoint: first bytes %q, want a TLS ClientHello", b)
		}
	})
	for _, env := range [][2]string{
		{"OTEL_EXPORTER_OTLP_INSECURE", "true"},
		{"OTEL_EXPORTER_OTLP_TRACES_INSECURE", "true"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://elsewhere:4317"},
	} {
		t.Run(env[0], func(t *testing.T) {
			t.Setenv(env[0], env[1])
			b := firstBytesSent(t, https, true)
			if !isTLSHello(b) {
				plain := bytes.HasPrefix(b, []byte("PRI *"))
				t.Fatalf("--otlp-endpoint https://... with %s=%s: first bytes %q (HTTP/2 plaintext preface: %v), want a TLS ClientHello", env[0], env[1], b, plain)
			}
		})
	}
	t.Run("http with --otlp-insecure=false", func(t *testing.T) {
		if b := firstBytesSent(t, func(a string) string { return "http://" + a }, false); !bytes.HasPrefix(b, []byte("PRI *")) {
			t.Fatalf("http endpoint: first bytes %q, want the HTTP/2 plaintext preface", b)
		}
	})
}
