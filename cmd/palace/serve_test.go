package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/palacehq/palace/pkg/apptest"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/tlstest"
)

var palaceServices = []string{
	"palace.ai.v1.AIService",
	"palace.clock.v1.ClockService",
	"palace.game.v1.GameService",
	"palace.matchmaking.v1.MatchmakingService",
	"palace.rules.v1.RulesService",
}

// startServe runs `palace serve` in this process on a free port with its
// in-process Redis and returns its address; the server stops when the
// test ends and must have stopped cleanly.
func startServe(t *testing.T, extra ...string) string {
	t.Helper()
	addr, _ := startServeStoppable(t, extra...)
	return addr
}

// startServeStoppable is startServe with a stop the test may call before
// it ends, as a deployment stops a replica; it returns once the server has
// stopped, cleanly.
func startServeStoppable(t *testing.T, extra ...string) (addr string, stop func()) {
	t.Helper()
	addr, stop, _ = startServeLogged(t, extra...)
	return addr, stop
}

// startServeLogged is startServeStoppable that also returns the logs.
func startServeLogged(t *testing.T, extra ...string) (addr string, stop func(), logs *apptest.LogBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	logs = &apptest.LogBuffer{}
	done := make(chan int, 1)
	args := append([]string{"--listen", "127.0.0.1:0", "--log-level", "warn"}, extra...)
	go func() {
		done <- serve(ctx, args, logs, serveOptions{onServing: func(a string) { addrc <- a }})
	}()
	select {
	case addr := <-addrc:
		var once sync.Once
		stop := func() {
			once.Do(func() {
				cancel()
				select {
				case code := <-done:
					if code != exitOK {
						t.Errorf("palace serve exited %d at stop; logs:\n%s", code, logs.String())
					}
				case <-time.After(15 * time.Second):
					t.Error("palace serve did not stop within 15s")
				}
			})
		}
		t.Cleanup(stop)
		return addr, stop, logs
	case code := <-done:
		cancel()
		t.Fatalf("palace serve exited %d before serving; logs:\n%s", code, logs.String())
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("palace serve did not start within 20s")
	}
	return "", nil, nil
}

func TestServeListsEveryServiceOverReflection(t *testing.T) {
	addr := startServe(t)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := reflectpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		got = append(got, s.GetName())
	}
	want := append(slices.Clone(palaceServices), "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection")
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("reflection does not list %s; got %v", w, got)
		}
	}
	// Health over native gRPC, for each service by its full name.
	hc := healthpb.NewHealthClient(cc)
	for _, svc := range palaceServices {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("gRPC health of %s: %v %v", svc, r.GetStatus(), err)
		}
	}
}

func TestServeAnswersHealthOverConnect(t *testing.T) {
	addr := startServe(t)
	for _, svc := range palaceServices {
		t.Run(svc, func(t *testing.T) {
			body := `{"service":"` + svc + `"}`
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/grpc.health.v1.Health/Check", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Connect-Protocol-Version", "1")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var got struct{ Status string }
			if err := json.Unmarshal(raw, &got); err != nil || resp.StatusCode != http.StatusOK || got.Status != "SERVING" {
				t.Fatalf("HTTP %d %s (%v), want SERVING", resp.StatusCode, raw, err)
			}
		})
	}
	// An unknown service is NotFound, so the check above can fail.
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/grpc.health.v1.Health/Check", strings.NewReader(`{"service":"palace.nope.v1.Nope"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Fatal("health of an unknown service answered 200")
	}
}

func TestServeExportsMetrics(t *testing.T) {
	addr := startServe(t)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), "go_goroutines") {
		t.Fatalf("HTTP %d, body without go_goroutines", resp.StatusCode)
	}
}

func TestServeRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
		says string
	}{
		{name: "unknown flag", args: []string{"--nope"}, want: exitUsage},
		{name: "bad log level", args: []string{"--log-level", "loud", "--listen", "127.0.0.1:0"}, want: exitFail},
		{name: "bad listen", args: []string{"--listen", "nohostport"}, want: exitFail},
		{name: "presence lease too short", args: []string{"--presence-lease", "100ms", "--listen", "127.0.0.1:0"}, want: exitFail, says: "--presence-lease must be at least 300ms"},
		{name: "replicas without a wait", args: []string{"--redis-wait-replicas", "1", "--redis-wait-timeout", "0s", "--listen", "127.0.0.1:0"}, want: exitFail, says: "the wait for replicas needs a positive timeout"},
		{name: "negative replicas", args: []string{"--redis-wait-replicas", "-1", "--listen", "127.0.0.1:0"}, want: exitFail, says: "replicas to wait for must not be negative"},
		{name: "replicas with the autopipeline", args: []string{"--redis-wait-replicas", "1", "--redis-autopipeline", "--listen", "127.0.0.1:0"}, want: exitFail, says: "--redis-wait-replicas cannot be combined with --redis-autopipeline"},
		// The in-process Redis has no replicas: every write would fail.
		{name: "replicas with the in-process Redis", args: []string{"--redis-wait-replicas", "1", "--listen", "127.0.0.1:0"}, want: exitFail, says: "--redis-wait-replicas 1 needs a Redis with replicas (--redis-addr)"},
		// NaN passes a "< 0" check, and a NaN window paired no two tickets.
		{name: "pairing window not a number", args: []string{"--pairing-window", "NaN", "--listen", "127.0.0.1:0"}, want: exitFail, says: `--pairing-window "NaN": not a finite number`},
		{name: "rating lease too short", args: []string{"--rating-lease", "2ns", "--listen", "127.0.0.1:0"}, want: exitFail, says: "--rating-lease 2ns: at least 100ms"},
		{name: "short service key", args: []string{"--service-keys", "k1:00ff", "--listen", "127.0.0.1:0"}, want: exitFail, says: "--service-keys: "},
		{name: "service key without an id", args: []string{"--service-keys", "00ff", "--listen", "127.0.0.1:0"}, want: exitFail, says: "--service-keys: "},
		{name: "negative engine move timeout", args: []string{"--ai-uci-move-timeout", "-1s", "--listen", "127.0.0.1:0"}, want: exitFail, says: "--ai-uci-move-timeout must not be negative"},
		{name: "negative keepalive", args: []string{"--keepalive-timeout", "-1s", "--listen", "127.0.0.1:0"}, want: exitFail, says: "--keepalive-time and --keepalive-timeout must not be negative"},
		{name: "bad CORS origin", args: []string{"--cors-origins", "https://play.example.com, play.example.com", "--listen", "127.0.0.1:0"}, want: exitFail, says: `--cors-origins: CORS origin "play.example.com"`},
		{name: "CORS origin with its default port", args: []string{"--cors-origins", "https://play.example.com:443", "--listen", "127.0.0.1:0"}, want: exitFail, says: "leave out the default port 443, as browsers do: https://play.example.com"},
		{name: "stream heartbeat too short", args: []string{"--heartbeat", "1ns", "--listen", "127.0.0.1:0"}, want: exitFail, says: "--heartbeat 1ns: at least 1ms"},
		{name: "watch heartbeat too short", args: []string{"--watch-heartbeat", "1ns", "--listen", "127.0.0.1:0"}, want: exitFail, says: "--watch-heartbeat 1ns: at least 100ms"},
		{name: "CORS headers without origins", args: []string{"--cors-headers", "x-request-id", "--listen", "127.0.0.1:0"}, want: exitFail, says: "--cors-headers needs --cors-origins"},
		{name: "bad CORS header", args: []string{"--cors-origins", "https://play.example.com", "--cors-headers", "x-request-id, sentry trace", "--listen", "127.0.0.1:0"}, want: exitFail, says: `--cors-headers: "sentry trace" is not a header name`},
		{name: "TLS key without a certificate", args: []string{"--tls-key", "k.pem", "--listen", "127.0.0.1:0"}, want: exitFail, says: "--tls-cert and --tls-key go together"},
		{name: "placeholder service key", args: []string{"--service-keys", "k1:" + strings.Repeat("ab", 32) + ", " + placeholderKey, "--listen", "127.0.0.1:0"}, want: exitFail, says: "--service-keys: key placeholder is a placeholder published with the deployment files"},
		{name: "placeholder seat key", args: []string{"--seat-signing-keys", placeholderKey, "--listen", "127.0.0.1:0"}, want: exitFail, says: "--seat-signing-keys: key placeholder is a placeholder published with the deployment files"},
		{name: "placeholder player key", args: []string{"--player-signing-keys", placeholderKey, "--listen", "127.0.0.1:0"}, want: exitFail, says: "--player-signing-keys: key placeholder is a placeholder published with the deployment files"},
		// Its services call each other through its own port: a CA for
		// other processes was taken and never read.
		{name: "peer TLS", args: []string{"--peer-tls", "ca.pem", "--listen", "127.0.0.1:0"}, want: exitUsage, says: "flag provided but not defined: -peer-tls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			// Bounded, so that flags wrongly taken fail the test rather
			// than serve for ever.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if got := serve(ctx, tt.args, &out, serveOptions{}); got != tt.want {
				t.Fatalf("exit %d, want %d; output:\n%s", got, tt.want, out.String())
			}
			if !strings.Contains(out.String(), tt.says) {
				t.Fatalf("output does not say %q:\n%s", tt.says, out.String())
			}
		})
	}
}

// TestServeNamesEveryBadFlagAtOnce: palace serve named only the first
// group of flags that failed (the shared ones, then each service's), so
// bad flags of three services took three restarts to find. A flag that
// two services check is named once.
//
// A value its flag's parser refused on the command line (here
// --shutdown-timeout 20, its unit forgotten) stopped the parse and was
// named alone.
func TestServeNamesEveryBadFlagAtOnce(t *testing.T) {
	t.Setenv("PALACE_MAX_RECV_BYTES", "1MiB")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	code := serve(ctx, []string{
		"--shutdown-timeout", "20",
		"--listen", "127.0.0.1:0",
		"--log-level", "bogus", // shared
		"--deadline-shards", "0", // the game and clock services
		"--ticket-ttl", "-1s", // matchmaking
		"--ai-engines", "0", // the AI service
		"--seat-signing-keys", placeholderKey,
	}, &out, serveOptions{})
	if code != exitFail {
		t.Fatalf("exit %d, want %d; output:\n%s", code, exitFail, out.String())
	}
	for _, flag := range []string{"--shutdown-timeout", "PALACE_MAX_RECV_BYTES", "--log-level", "--deadline-shards", "--ticket-ttl", "--ai-engines", "--seat-signing-keys"} {
		if n := strings.Count(out.String(), flag); n != 1 {
			t.Errorf("%s named %d times, want once:\n%s", flag, n, out.String())
		}
	}
}

// placeholderKey is the service key deploy/ ships: hex of
// "INSECURE-SERVICE-PLACEHOLDER-ME!".
const placeholderKey = "placeholder:494e5345435552452d534552564943452d504c414345484f4c4445522d4d4521"

// TestServeWarnsOfAllowedPlaceholderKeys: with --allow-placeholder-keys
// the placeholder keys of the deployment files are taken, and every flag
// that holds one is warned of.
func TestServeWarnsOfAllowedPlaceholderKeys(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var logs apptest.LogBuffer
	args := []string{"--listen", "127.0.0.1:0", "--allow-placeholder-keys", "--ai-workers", "0",
		"--service-keys", placeholderKey, "--seat-signing-keys", placeholderKey, "--player-signing-keys", placeholderKey}
	if got := serve(ctx, args, &logs, serveOptions{onServing: func(string) { cancel() }}); got != exitOK {
		t.Fatalf("exit %d, want %d; output:\n%s", got, exitOK, logs.String())
	}
	for _, flag := range []string{"--service-keys", "--seat-signing-keys", "--player-signing-keys"} {
		if !regexp.MustCompile(`placeholder keys allowed.*flag=` + flag + ` `).MatchString(logs.String()) {
			t.Errorf("no warning of the placeholder in %s:\n%s", flag, logs.String())
		}
	}
}

// TestServeTakesNoGameAddress: palace serve runs the game service, and
// its other services reach it through the process's own port, so it has
// no --game-addr, and ignores PALACE_GAME_ADDR, which a shared settings
// block may hold: an address that reached some of them would have them
// play on another game service than the rest.
func TestServeTakesNoGameAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	if got := serve(ctx, []string{"--listen", "127.0.0.1:0", "--game-addr", "127.0.0.1:1"}, &out, serveOptions{}); got != exitUsage || !strings.Contains(out.String(), "-game-addr") {
		t.Fatalf("exit %d, want %d; output:\n%s", got, exitUsage, out.String())
	}
}

// TestServeRejectsStrayArgumentsAndBadEnvironment: a flag written without
// its dashes, or an environment value its flag cannot parse, stops serve
// at once instead of serving with the setting silently left out.
func TestServeRejectsStrayArgumentsAndBadEnvironment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	if got := serve(ctx, []string{"--listen", "127.0.0.1:0", "redis-addr"}, &out, serveOptions{}); got != exitUsage || !strings.Contains(out.String(), `unexpected argument "redis-addr"`) {
		t.Fatalf("stray argument: exit %d, want %d; output:\n%s", got, exitUsage, out.String())
	}
	t.Setenv("PALACE_PAIRING_WINDOW", "NaN")
	out.Reset()
	if got := serve(ctx, []string{"--listen", "127.0.0.1:0"}, &out, serveOptions{}); got != exitFail || !strings.Contains(out.String(), "PALACE_PAIRING_WINDOW") {
		t.Fatalf("a pairing window that is not a number: exit %d, want %d; output:\n%s", got, exitFail, out.String())
	}
	t.Setenv("PALACE_PAIRING_WINDOW", "")
	t.Setenv("PALACE_REDIS_WAIT_REPLICAS", " 1")
	out.Reset()
	if got := serve(ctx, []string{"--listen", "127.0.0.1:0"}, &out, serveOptions{}); got != exitFail || !strings.Contains(out.String(), "PALACE_REDIS_WAIT_REPLICAS") {
		t.Fatalf("bad environment value: exit %d, want %d; output:\n%s", got, exitFail, out.String())
	}
}

// A web app on an origin named in --cors-origins calls the services from
// a browser: its preflight is answered and it may read the answer.
func TestServeLetsAllowedPagesCall(t *testing.T) {
	const origin = "http://localhost:5173"
	addr := startServe(t, "--cors-origins", "https://play.example.com,"+origin)
	url := "http://" + addr + "/palace.rules.v1.RulesService/StartPosition"
	req, _ := http.NewRequest(http.MethodOptions, url, nil)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", http.MethodPost)
	req.Header.Set("Access-Control-Request-Headers", "connect-protocol-version,content-type")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Fatalf("preflight: HTTP %d, headers %v", resp.StatusCode, resp.Header)
	}
	req, _ = http.NewRequest(http.MethodPost, url, strings.NewReader(`{"kind":"GAME_KIND_XIANGQI"}`))
	req.Header.Set("Origin", origin)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), "rnbakabnr") || resp.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Fatalf("call: HTTP %d %s, allow-origin %q", resp.StatusCode, raw, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

// With --tls-cert and --tls-key every service is served over TLS, and the
// services of one process reach each other through its TLS port: a guest
// over TLS gets a game from matchmaking, which created it on the game
// service, and the AI worker plays the first move in it.
func TestServeOverTLS(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	pool := tlstest.WriteCert(t, certPath, keyPath, "palace")
	addr := startServe(t, "--tls-cert", certPath, "--tls-key", keyPath)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	mm := matchmakingv1.NewMatchmakingServiceClient(cc)
	guest, err := mm.CreateGuest(ctx, &matchmakingv1.CreateGuestRequest{Nickname: "tls"})
	if err != nil {
		t.Fatal(err)
	}
	bearer := func(token string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	played, err := mm.PlayAi(bearer(guest.GetToken()), &matchmakingv1.PlayAiRequest{
		RequestId: "tls-1", Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Level: 1, Side: commonv1.Side_SIDE_SECOND,
	})
	if err != nil {
		t.Fatalf("PlayAi over TLS: %v", err)
	}
	games := gamev1.NewGameServiceClient(cc)
	for {
		g, err := games.GetGame(bearer(played.GetSeat().GetToken()), &gamev1.GetGameRequest{GameId: played.GetSeat().GetGameId()})
		if err != nil {
			t.Fatal(err)
		}
		if len(g.GetGame().GetMoves()) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the AI made no first move over the process's TLS port")
		case <-time.After(50 * time.Millisecond):
		}
	}

	var out bytes.Buffer
	if got := runHealth(ctx, []string{"--addr", addr, "--tls", certPath}, &out, &out); got != exitOK {
		t.Errorf("palace health --tls: exit %d: %s", got, out.String())
	}
	var plain bytes.Buffer
	if got := runHealth(ctx, []string{"--addr", addr, "--timeout", "1s"}, &plain, &plain); got != exitFail || !strings.Contains(plain.String(), "add --tls") {
		t.Errorf("palace health in plaintext to a TLS port: exit %d, want %d, saying to add --tls: %s", got, exitFail, plain.String())
	}
	if got := runHealth(ctx, []string{"--addr", addr, "--tls", certPath, "--tls-server-name", "game.example", "--timeout", "1s"}, &out, &out); got != exitFail {
		t.Errorf("palace health --tls-server-name of a name the certificate lacks: exit %d, want %d", got, exitFail)
	}
	// Beside the server, where its PALACE_TLS_CERT is set (a container's
	// health check, a pod's probe): its certificate is accepted as it is.
	t.Setenv("PALACE_TLS_CERT", certPath)
	if got := runHealth(ctx, []string{"--addr", "localhost:" + addr[strings.LastIndex(addr, ":")+1:]}, &out, &out); got != exitOK {
		t.Errorf("palace health beside the server, by a name its certificate lacks: exit %d: %s", got, out.String())
	}

	for _, args := range [][]string{{"--tls-cert", certPath}, {"--tls-cert", filepath.Join(dir, "none"), "--tls-key", keyPath}} {
		var out bytes.Buffer
		if got := serve(ctx, append([]string{"--listen", "127.0.0.1:0"}, args...), &out, serveOptions{}); got != exitFail {
			t.Errorf("%v: exit %d, want %d; output:\n%s", args, got, exitFail, out.String())
		}
	}
}

// TestHealthRefusesATimeoutThatCannotBeMet: a --timeout of 0 or less
// could only time out, and was reported as the server failing (exit 1,
// "context deadline exceeded"): a health check written so was unhealthy
// for ever, nothing pointing at the flag.
func TestHealthRefusesATimeoutThatCannotBeMet(t *testing.T) {
	for _, d := range []string{"0s", "-1s"} {
		_, errOut, code := palace("health", "--addr", "127.0.0.1:1", "--timeout", d)
		if code != exitUsage || !strings.Contains(errOut, "--timeout") {
			t.Errorf("palace health --timeout %s: exit %d, stderr %q; want %d naming --timeout", d, code, strings.TrimSpace(errOut), exitUsage)
		}
	}
}
