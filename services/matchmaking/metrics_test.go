package matchmaking_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
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
	// Two players on a control of their own: counted under the kind's
	// custom label, as every such pool is, so that players choosing
	// controls cannot make series without end.
	d, f := e.guest("D"), e.guest("F")
	own := fischer(61*time.Second, 1500*time.Millisecond)
	td := e.enter(e.mm[0], d, &matchmakingv1.EnterQueueRequest{TimeControl: own})
	e.enter(e.mm[0], f, &matchmakingv1.EnterQueueRequest{TimeControl: own})
	waitTicket(t, e.mm[0], d, td.GetTicketId(), 10*time.Second)

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
		for _, l := range strings.Split(text, "\n") {
			if !strings.HasPrefix(l, "palace_matchmaking_matches_total{") && !strings.HasPrefix(l, "palace_matchmaking_time_to_match_seconds") {
				continue
			}
			if !strings.Contains(l, `pool="janggi/5m+3x30s/casual"`) && !strings.Contains(l, `pool="janggi/custom/casual"`) {
				t.Fatalf("a series labelled with a pool of a player's own control: %s", l)
			}
		}
		for _, want := range []string{
			`palace_matchmaking_matches_total{`,
			`pool="janggi/custom/casual"`,
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

// The gauge of tickets waiting labelled each pool with its own time
// control: a script entering the queue on 1 s, 2 s, 3 s... made as many
// series as it liked, kept by Prometheus for its retention. Such pools
// are summed under their kind's custom label, as in the other metrics.
func TestTicketsWaitingOnPlayersOwnControlsShareALabel(t *testing.T) {
	e := newEnv(t, 1, nil)
	const n = 6
	for i := range n {
		p := e.guest(fmt.Sprintf("P%d", i))
		e.enter(e.mm[0], p, &matchmakingv1.EnterQueueRequest{TimeControl: fischer(time.Duration(61+i)*time.Second, time.Duration(1500+i)*time.Millisecond)})
	}
	series := regexp.MustCompile(`(?m)^palace_matchmaking_tickets_waiting\{[^}]*pool="([^"]*)"[^}]*\} (\d+)$`)
	var text string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + e.addrs[0] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		text = string(b)
		got := map[string]string{}
		for _, m := range series.FindAllStringSubmatch(text, -1) {
			got[m[1]] = m[2]
		}
		if len(got) == 1 && got["janggi/custom/casual"] == strconv.Itoa(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tickets waiting by pool: %v, want only janggi/custom/casual: %d", got, n)
		}
	}
}
