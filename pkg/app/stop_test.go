package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/apptest"
	"github.com/palacehq/palace/pkg/redistest"
)

// startWithDeadCollector runs a process with no service of its own that
// sends its traces to a collector nobody listens for, with JSON logs.
func startWithDeadCollector(t *testing.T, extra ...string) (addr string, stop func() (time.Duration, error), out *apptest.LogBuffer) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close() // nothing listens there now

	cfg := app.Config{NoRedis: true}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.RegisterFlags(fs, "127.0.0.1:0")
	args := append([]string{"--log-format", "json", "--otlp-endpoint", dead}, extra...)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	out = &apptest.LogBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, app.Options{Name: "test", Config: cfg, LogOutput: out, OwnsProcess: true, OnServing: func(a string) { addrc <- a }})
	}()
	select {
	case addr = <-addrc:
	case err := <-done:
		cancel()
		t.Fatalf("the process did not start: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("the process did not start within 20s")
	}
	stopped := false
	stop = func() (time.Duration, error) {
		stopped = true
		start := time.Now()
		cancel()
		select {
		case err := <-done:
			return time.Since(start), err
		case <-time.After(time.Minute):
			t.Fatal("the process did not stop within a minute")
			return 0, nil
		}
	}
	t.Cleanup(func() {
		if !stopped {
			_, _ = stop()
		}
	})
	return addr, stop, out
}

// A stop gives an unreachable trace collector no more than
// --otlp-flush-timeout to take the spans still queued. Waiting for the
// exporter to give up on each queued batch in turn (10 s each) took a
// gamed 46 s to stop after a few seconds of load, past the 35 s a
// Kubernetes pod of the deployment files is given before it is killed.
// The spans not taken are dropped, which is no failure of the process: it
// says so at WARN and stops cleanly.
func TestAStopGivesAnUnreachableCollectorNoMoreThanTheFlushTimeout(t *testing.T) {
	addr, stop, out := startWithDeadCollector(t, "--otlp-flush-timeout", "300ms")
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	health := healthpb.NewHealthClient(cc)
	// Each call is a span, sampled and queued for the collector.
	for range 20 {
		if _, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}

	took, err := stop()
	if err != nil {
		t.Fatalf("a stop that dropped unsent spans returned %v, want nil", err)
	}
	// The flush timeout plus the time a stop takes with no call running,
	// with room for a busy machine; the exporter alone waits 10 s.
	if took > 5*time.Second {
		t.Fatalf("the stop took %v with --otlp-flush-timeout 300ms", took)
	}
	found := false
	for line := range strings.Lines(out.String()) {
		var rec struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		if rec.Level == "WARN" && strings.Contains(rec.Msg, "spans") && strings.Contains(rec.Msg, "dropped") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no WARN record of the spans dropped at stop in:\n%s", out.String())
	}
}

// What the trace exporter reports (a collector out of reach, spans
// dropped) is a record of the process's logger: the library's default
// writes plain lines to stderr, which break a JSON log stream just when
// an operator reads it.
func TestTheTraceExportersTroubleIsLoggedThroughTheProcessLogger(t *testing.T) {
	_, stop, out := startWithDeadCollector(t)
	otel.Handle(errors.New("traces export: collector out of reach"))
	if _, err := stop(); err != nil {
		t.Fatal(err)
	}
	found := false
	for line := range strings.Lines(out.String()) {
		var rec struct{ Level, Msg, Detail string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		if rec.Level == "WARN" && rec.Msg == "telemetry" && rec.Detail == "traces export: collector out of reach" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no WARN record of the exporter's error in:\n%s", out.String())
	}
}

// stopAsSoonAsServing runs a process of the one service bind, with JSON
// logs and no Redis, stops it once it serves, and returns the log and
// what Run returned.
func stopAsSoonAsServing(t *testing.T, bind app.Binder) (string, error) {
	t.Helper()
	cfg := app.Config{NoRedis: true}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.RegisterFlags(fs, "127.0.0.1:0")
	if err := fs.Parse([]string{"--log-format", "json"}); err != nil {
		t.Fatal(err)
	}
	out := &apptest.LogBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, app.Options{Name: "test", Config: cfg, LogOutput: out, Services: []app.Binder{bind}, OnServing: func(string) { cancel() }})
	}()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(30 * time.Second):
		t.Fatal("no stop within 30 s of the stop asked for")
		return "", nil
	}
}

// A service whose close never ends (its Redis stalled) holds the stop no
// longer than the close's 5 s: the process says so at WARN and stops
// cleanly, as after a crash, which every service recovers from.
func TestAServiceCloseThatHangsIsLeftUnfinished(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	log, err := stopAsSoonAsServing(t, func(context.Context, *app.Runtime) (func() error, error) {
		return func() error { <-release; return nil }, nil
	})
	if err != nil {
		t.Fatalf("a stop that left a close unfinished returned %v, want nil", err)
	}
	if !strings.Contains(log, `"level":"WARN","msg":"stop: the services' closing did not end in time`) {
		t.Fatalf("no WARN record of the close left unfinished in:\n%s", log)
	}
}

// TestAServiceCloseThatFailsIsLeftUnfinished: a service whose close failed
// at once (the clock's lease release, Redis gone as the process stopped)
// made the process exit 1 with a bare stderr line, where a close that
// hangs is warned of and the stop is clean. Both are left as after a
// crash, for other replicas to take over.
func TestAServiceCloseThatFailsIsLeftUnfinished(t *testing.T) {
	log, err := stopAsSoonAsServing(t, func(context.Context, *app.Runtime) (func() error, error) {
		return func() error { return errors.New("release leases: connection refused") }, nil
	})
	if err != nil {
		t.Fatalf("a stop whose close failed returned %v, want nil", err)
	}
	if !strings.Contains(log, `"level":"WARN","msg":"stop: the services' closing failed`) || !strings.Contains(log, "release leases: connection refused") {
		t.Fatalf("no WARN record of the failed close in:\n%s", log)
	}
}

// OpenTelemetry's own log is the process's too: an OTEL_EXPORTER_OTLP_*
// variable the exporter cannot read (a timeout in milliseconds, written
// with a unit) is an ERROR record, not a plain line.
func TestOpenTelemetrysOwnLogIsTheProcessLogger(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5s")
	_, stop, out := startWithDeadCollector(t)
	if _, err := stop(); err != nil {
		t.Fatal(err)
	}
	found := false
	for line := range strings.Lines(out.String()) {
		var rec struct{ Level, Msg, Component, Err string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		if rec.Level == "ERROR" && rec.Component == "telemetry" && rec.Msg == "parse duration" && strings.Contains(rec.Err, `"5s"`) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no ERROR record of the variable the exporter could not read in:\n%s", out.String())
	}
}

// TestOpenTelemetrysOwnLogQuotesNoCredential: OTEL_EXPORTER_OTLP_HEADERS
// holds the collector's credentials (the --otlp-endpoint refusal itself
// points there), and an OTLP endpoint variable may hold them too. An
// entry the exporter could not read (a header written "Authorization:
// Bearer ..." as HTTP has it, or a token holding a '%' not followed by two
// hex digits; an endpoint that is no URL) was logged by OpenTelemetry,
// token and all, into the process's log, which log shippers carry off.
func TestOpenTelemetrysOwnLogQuotesNoCredential(t *testing.T) {
	const secret = "s3cr3t-ingest-token"
	for _, env := range [][2]string{
		{"OTEL_EXPORTER_OTLP_HEADERS", "Authorization: Bearer " + secret},
		{"OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%zz" + secret},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://tenant:" + secret + "@collector:43 17"},
		// A password holding a '/' or '#' ends the URL's authority there:
		// its head is read as a port, which url.Parse's error quotes.
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://tenant:" + secret + "/Zm9v@collector:4317"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://tenant:" + secret + "#x@collector:4317"},
	} {
		t.Run(env[0], func(t *testing.T) {
			t.Setenv(env[0], env[1])
			_, stop, out := startWithDeadCollector(t)
			if _, err := stop(); err != nil {
				t.Fatal(err)
			}
			logged := false
			for line := range strings.Lines(out.String()) {
				if strings.Contains(line, secret) {
					t.Fatalf("the process log shows the collector's token: %s", line)
				}
				logged = logged || strings.Contains(line, `"component":"telemetry"`) && strings.Contains(line, `"level":"ERROR"`)
			}
			if !logged {
				t.Fatalf("no ERROR record of the %s the exporter could not read in:\n%s", env[0], out.String())
			}
		})
	}
}

// TestAnExportErrorQuotesNoHeaderCredential: a credential pasted into
// OTEL_EXPORTER_OTLP_HEADERS bare (base64 "user:token", no "authorization=
// Basic " before it) is read up to its '=' padding as a header key: a valid
// HTTP token, but a '+' is no gRPC metadata key character, and every export
// then failed with gRPC's error quoting the key, which the process logged
// whole (lowercased, which a guess per 4 characters of base64 undoes).
func TestAnExportErrorQuotesNoHeaderCredential(t *testing.T) {
	const cred = "MTIzNDU2OmdsY19zM2NyM3R+aW5nZXN0PnRva2VuMQ==" // base64("123456:glc_s3cr3t~ingest>token1")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", cred)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	addr, stop, out := startWithDeadCollector(t, "--otlp-flush-timeout", "300ms")
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_, _ = healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{})
	quoted := strings.ToLower(strings.TrimRight(cred, "="))
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(out.String(), `"msg":"telemetry"`) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := stop(); err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(out.String()) {
		if strings.Contains(line, quoted) {
			t.Errorf("the process log quotes the header's credential (lowercased base64, whose case a guess per 4 characters restores): %s", line)
		}
	}
}

// TestAStopWhileWaitingForRedisIsAStop: a process stopped (SIGTERM) while
// it waits at start for a Redis out of reach returned the cancellation as
// its error, so `palace serve` and the daemons exited 1, and a supervisor
// recorded a failure for a stop it asked for. It returns nil now, and
// says so.
func TestAStopWhileWaitingForRedisIsAStop(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := lis.Addr().String()
	lis.Close()
	cfg := app.Config{}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.RegisterFlags(fs, "127.0.0.1:0")
	if err := fs.Parse([]string{"--redis-addr", nobody, "--redis-wait", "1m"}); err != nil {
		t.Fatal(err)
	}
	out := &apptest.LogBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, app.Options{Name: "test", Config: cfg, LogOutput: out}) }()
	// Stopped once the wait is under way (it logs at its first failure).
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "redis out of reach"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no wait for Redis told within 10s:\n%s", out.String())
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stopped while waiting for Redis: %v, want nil\n%s", err, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop within 10s of the stop")
	}
	if !strings.Contains(out.String(), "stopped while waiting for redis") {
		t.Errorf("the stop is not told:\n%s", out.String())
	}
}

// TestAStopWhileAServiceStartsIsAStop: as a stop while waiting for Redis,
// a stop while a service binds (the game and clock services check their
// deadline shards, the AI service ensures its queue, each a Redis call
// under the start's context) returned the cancellation as the process's
// error: exit 1. It is a clean stop too.
func TestAStopWhileAServiceStartsIsAStop(t *testing.T) {
	addr := redistest.Addr(t)
	cfg := app.Config{}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.RegisterFlags(fs, "127.0.0.1:0")
	if err := fs.Parse([]string{"--redis-addr", addr}); err != nil {
		t.Fatal(err)
	}
	binding := make(chan struct{})
	slowStart := func(ctx context.Context, rt *app.Runtime) (func() error, error) {
		close(binding)
		// A service's start makes its Redis calls one after another (the
		// game service: replicas, shards, the AI queue, scripts); the stop
		// comes between two of them, and the next fails with it.
		<-ctx.Done()
		if err := rt.Redis.Ping(ctx).Err(); err != nil {
			return nil, fmt.Errorf("check shards: %w", err)
		}
		return nil, nil
	}
	out := &apptest.LogBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, app.Options{Name: "test", Config: cfg, LogOutput: out, Services: []app.Binder{slowStart}})
	}()
	select {
	case <-binding:
	case err := <-done:
		t.Fatalf("Run ended before binding: %v\n%s", err, out.String())
	case <-time.After(10 * time.Second):
		t.Fatal("no bind within 10s")
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stopped while a service was starting: Run returned %v, want nil (a stop asked for, as while waiting for Redis)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop within 10s of the stop")
	}
}
