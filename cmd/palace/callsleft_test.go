package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
)

// seatedGuest is a guest seated in a live game against another, made
// through matchmaking over cc.
type seatedGuest struct {
	cc          *grpc.ClientConn
	token, game string
	seat        string
}

func newSeatedGuest(t *testing.T, addr string) seatedGuest {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	mm := matchmakingv1.NewMatchmakingServiceClient(cc)
	var tokens [2]string
	for i := range tokens {
		g, err := mm.CreateGuest(ctx, &matchmakingv1.CreateGuestRequest{Nickname: fmt.Sprintf("guest%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		tokens[i] = g.GetToken()
	}
	as := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	inv, err := mm.CreateInvite(as(tokens[0]), &matchmakingv1.CreateInviteRequest{RequestId: "seated", Kind: commonv1.GameKind_GAME_KIND_XIANGQI})
	if err != nil {
		t.Fatal(err)
	}
	acc, err := mm.AcceptInvite(as(tokens[1]), &matchmakingv1.AcceptInviteRequest{Token: inv.GetInvite().GetToken()})
	if err != nil {
		t.Fatal(err)
	}
	return seatedGuest{cc: cc, token: tokens[1], game: acc.GetInvite().GetSeat().GetGameId(), seat: acc.GetInvite().GetSeat().GetToken()}
}

// metricCount is how many calls of method /metrics counts with code.
func metricCount(t *testing.T, addr, method, code string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`(?m)^rpc_server_call_duration_seconds_count\{[^}]*rpc_method="[^"]*` + regexp.QuoteMeta(method) + `",rpc_response_status_code="` + code + `"[^}]*\} (\d+)`)
	n := 0
	for _, m := range re.FindAllStringSubmatch(string(raw), -1) {
		var k int
		fmt.Sscan(m[1], &k)
		n += k
	}
	return n
}

// warnings are the WARN and ERROR lines of logs, but the clock sweeper's:
// a machine starved by other tests makes it lose and take its shards'
// leases, and say so, whatever the calls do.
func warnings(logs string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "component=clock") {
			continue
		}
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			out = append(out, l)
		}
	}
	return out
}

// TestAStreamLeftMidSendIsCanceled: a client that leaves a stream while
// the server sends to it (here heartbeats every millisecond) made the
// send fail "transport is closing" over Connect and gRPC-Web, which the
// stream returned: logged WARN Unavailable and counted UNAVAILABLE, an
// outage's code, where a stream left at rest was Canceled.
func TestAStreamLeftMidSendIsCanceled(t *testing.T) {
	addr, _, logs := startServeLogged(t, "--log-level", "debug", "--ai-workers", "0", "--heartbeat", "1ms")
	g := newSeatedGuest(t, addr)
	const method = "/palace.game.v1.GameService/StreamEvents"
	before := len(logs.String())
	for name, opts := range connectProtocols {
		for i := range 50 {
			c := connect.NewClient[gamev1.StreamEventsRequest, gamev1.StreamEventsResponse](http.DefaultClient, "http://"+addr+method, opts...)
			ctx, cancel := context.WithCancel(context.Background())
			req := connect.NewRequest(&gamev1.StreamEventsRequest{GameId: g.game, Snapshot: true})
			req.Header().Set("Authorization", "Bearer "+g.seat)
			st, err := c.CallServerStream(ctx, req)
			if err != nil || !st.Receive() {
				t.Fatalf("%s: %v", name, err)
			}
			time.Sleep(time.Duration(i%5) * time.Millisecond)
			cancel()
		}
	}
	time.Sleep(time.Second) // the last calls end
	if n := metricCount(t, addr, "GameService/StreamEvents", "UNAVAILABLE"); n > 0 {
		t.Errorf("/metrics counts %d of the StreamEvents their clients left as UNAVAILABLE", n)
	}
	if w := warnings(logs.String()[before:]); len(w) > 0 {
		t.Errorf("streams their clients left were logged at WARN or ERROR: %q", w[0])
	}
}

// TestADeadlinePassingInACallToAnotherServiceIsTheClients: a client's
// deadline that passed while matchmaking waited on the game service
// (ResumeGame asks it for a seat credential) was answered Unavailable,
// logged WARN "unavailable" and counted as an outage.
func TestADeadlinePassingInACallToAnotherServiceIsTheClients(t *testing.T) {
	addr, _, logs := startServeLogged(t, "--log-level", "debug", "--ai-workers", "0")
	g := newSeatedGuest(t, addr)
	mm := matchmakingv1.NewMatchmakingServiceClient(g.cc)
	before := len(logs.String())
	for i := range 300 {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+g.token), time.Duration(200+i*30)*time.Microsecond)
		_, _ = mm.ResumeGame(ctx, &matchmakingv1.ResumeGameRequest{GameId: g.game})
		cancel()
	}
	time.Sleep(500 * time.Millisecond) // the last calls end
	if n := metricCount(t, addr, "MatchmakingService/ResumeGame", "UNAVAILABLE"); n > 0 {
		t.Errorf("/metrics counts %d ResumeGame calls whose client's deadline passed as UNAVAILABLE", n)
	}
	if w := warnings(logs.String()[before:]); len(w) > 0 {
		t.Errorf("ResumeGame calls whose client's deadline passed were logged at WARN or ERROR: %q", w[0])
	}
}
