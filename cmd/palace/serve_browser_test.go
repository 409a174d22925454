package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	aiv1 "github.com/palacehq/palace/pkg/gen/palace/ai/v1"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
)

// connectProtocols are the protocols of browser clients, as connect-go
// speaks them.
var connectProtocols = map[string][]connect.ClientOption{
	"connect+json":  {connect.WithProtoJSON()},
	"grpc-web+json": {connect.WithProtoJSON(), connect.WithGRPCWeb()},
}

// TestABrowserLeavingAnAnalysisIsCanceled: a page that leaves an analysis
// (its tab closed, its fetch aborted) hangs up, as a native gRPC client
// cancels. The search stops with a move when its context ends, and
// Analyze went on to send it or returned the send that failed: over
// Connect and gRPC-Web the call was logged WARN Unavailable, the code of
// an outage operators alert on, or OK; it is Canceled, at DEBUG.
func TestABrowserLeavingAnAnalysisIsCanceled(t *testing.T) {
	addr, _, logs := startServeLogged(t, "--log-level", "debug")
	for name, opts := range connectProtocols {
		t.Run(name, func(t *testing.T) {
			c := connect.NewClient[aiv1.AnalyzeRequest, aiv1.AnalyzeResponse](http.DefaultClient, "http://"+addr+"/palace.ai.v1.AIService/Analyze", opts...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st, err := c.CallServerStream(ctx, connect.NewRequest(&aiv1.AnalyzeRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Limits: &aiv1.SearchLimits{MovetimeMs: 20000}}))
			if err != nil {
				t.Fatal(err)
			}
			if !st.Receive() {
				t.Fatalf("no progress from Analyze: %v", st.Err())
			}
			before := len(logs.String())
			cancel()
			re := regexp.MustCompile(`level=(\w+) msg=rpc .*method=/palace.ai.v1.AIService/Analyze code=(\w+)`)
			var l []string
			for deadline := time.Now().Add(5 * time.Second); l == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				l = re.FindStringSubmatch(logs.String()[before:])
			}
			if l == nil {
				t.Fatalf("the Analyze its client left is not logged within 5 s")
			}
			if l[1] != "DEBUG" || l[2] != "Canceled" {
				t.Fatalf("an Analyze its client left: logged %s with code %s, want DEBUG Canceled: %s", l[1], l[2], l[0])
			}
		})
	}
}

// TestABestMoveWhoseDeadlineComesFirstIsDeadlineExceeded: a Connect call
// whose deadline (Connect-Timeout-Ms) came before its search's limits was
// answered OK with the move of a search cut short, as if it had run to
// them.
func TestABestMoveWhoseDeadlineComesFirstIsDeadlineExceeded(t *testing.T) {
	addr := startServe(t)
	// Raw, so that the answer is the server's: a client enforcing its own
	// deadline would give up first.
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.ai.v1.AIService/BestMove",
		strings.NewReader(`{"kind":"GAME_KIND_XIANGQI","limits":{"movetimeMs":5000}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Connect-Timeout-Ms", "800")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(answer), `"code":"deadline_exceeded"`) {
		t.Fatalf("a BestMove of 5 s within a deadline of 800 ms: HTTP %d %s, want deadline_exceeded", resp.StatusCode, answer)
	}
}

// TestReflectionAnswersOverConnect: buf curl lists and describes services
// through server reflection over the Connect protocol (its default) on
// an HTTP/2 connection, a stream whose request body stays open while the
// answers come. The edge read every Connect body whole before the call,
// so the answer never came, and the call failed after --body-timeout.
func TestReflectionAnswersOverConnect(t *testing.T) {
	addr := startServe(t, "--body-timeout", "3s")
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	c := connect.NewClient[reflectpb.ServerReflectionRequest, reflectpb.ServerReflectionResponse](hc, "http://"+addr+"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := c.CallBidiStream(ctx)
	defer st.CloseRequest()
	for _, name := range []string{"", "palace.game.v1.GameService"} {
		req := &reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}}
		if name != "" {
			req.MessageRequest = &reflectpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: name}
		}
		start := time.Now()
		if err := st.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := st.Receive()
		if err != nil || time.Since(start) > 2*time.Second {
			t.Fatalf("reflection over Connect, asked %v: %v %v after %v", req, resp, err, time.Since(start).Round(time.Millisecond))
		}
		if name == "" && len(resp.GetListServicesResponse().GetService()) < len(palaceServices) {
			t.Fatalf("services listed over Connect: %v", resp.GetListServicesResponse().GetService())
		}
		if name != "" && len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
			t.Fatalf("no descriptor of %s over Connect: %v", name, resp)
		}
	}

	// Its first message is still bounded: a client that sends none holds
	// no handler past --body-timeout.
	body, w := io.Pipe()
	defer w.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/connect+proto")
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	end, _ := io.ReadAll(resp.Body)
	if took := time.Since(start); !strings.Contains(string(end), "deadline_exceeded") || took > 5*time.Second {
		t.Fatalf("a reflection call over Connect that sent no message: HTTP %d %q after %v, want deadline_exceeded after the body timeout of 3 s", resp.StatusCode, end, took.Round(time.Millisecond))
	}
}
