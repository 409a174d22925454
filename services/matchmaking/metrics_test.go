package matchmaking_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
)

func TestMetrics(t *testing.T) {
	e := newEnv(t, 1, nil)
	a, b, c := e.guest("A"), e.guest("B"), e.guest("C")
	ta := e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{})
	e.enter(e.mm[0], b, &matchmakingv1.EnterQueueRequest{})
	waitTicket(t, e.mm[0], a, ta.GetTicketId(), 10*time.Second)
	e.enter(e.mm[0], c, &matchmakingv1.EnterQueueRequest{Kind: xiangqi}) // waits alone

	// The match is counted after its tickets are answered, so the
	// metrics are polled rather than read once.
	var text string
	missing := func() []string {
		resp, err := http.Get("http://" + e.addrs[0] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		text = string(body)
		var out []string
		waitingOK := false
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, "palace_matchmaking_tickets_waiting{") && strings.HasSuffix(l, `pool="xiangqi/5m+3x30s/casual"} 1`) {
				waitingOK = true
			}
		}
		if !waitingOK {
			out = append(out, "one ticket waiting in the xiangqi pool")
		}
		for _, want := range []string{
			`palace_matchmaking_matches_total{`,
			`palace_matchmaking_time_to_match_seconds_bucket{`,
			`palace_matchmaking_time_to_match_seconds_count{`,
		} {
			if !strings.Contains(text, want) {
				out = append(out, want)
			}
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for m := missing(); len(m) > 0; m = missing() {
		if time.Now().After(deadline) {
			for _, l := range strings.Split(text, "\n") {
				if strings.Contains(l, "matchmaking") {
					t.Log(l)
				}
			}
			t.Fatalf("/metrics lacks %s", strings.Join(m, ", "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
