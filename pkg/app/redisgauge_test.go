package app_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/apptest"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestTheRedisGaugeFollowsAnOutage: health stays SERVING while Redis is
// out of reach, so palace_redis_reachable is what tells it: 1 while Redis
// answers, 0 once it is down, 1 again once it is back.
func TestTheRedisGaugeFollowsAnOutage(t *testing.T) {
	s := redistest.Own(t)
	addr := apptest.Start(t, s.Addr).Target()
	wait := func(want string) {
		t.Helper()
		var got string
		for until := time.Now().Add(10 * time.Second); time.Now().Before(until); time.Sleep(50 * time.Millisecond) {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			got = "no palace_redis_reachable line"
			for line := range strings.Lines(string(body)) {
				if strings.HasPrefix(line, "palace_redis_reachable") {
					got = strings.TrimSpace(line)
				}
			}
			if strings.HasSuffix(got, " "+want) {
				return
			}
		}
		t.Fatalf("want palace_redis_reachable %s, got %s", want, got)
	}
	wait("1")
	s.Kill()
	wait("0")
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	wait("1")
}

// TestTheRedisGaugeSaysASilentRedisAtOnce: a Redis that stalls (its
// machine frozen, its link cut without a reset) answers nothing, and
// refuses nothing either. A scrape must still come back within a second
// or two with palace_redis_reachable 0: one held past Prometheus' timeout
// fails whole, and the gauge an operator alerts on is never seen.
func TestTheRedisGaugeSaysASilentRedisAtOnce(t *testing.T) {
	s := redistest.Own(t)
	addr := apptest.Start(t, s.Addr).Target()
	s.Pause(t)
	t.Cleanup(func() { s.Resume(t) })
	for range 2 {
		start := time.Now()
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("a scrape took %v with Redis silent", took.Round(time.Millisecond))
		}
		reported := false
		for line := range strings.Lines(string(body)) {
			reported = reported || strings.HasPrefix(line, "palace_redis_reachable") && strings.HasSuffix(line, " 0\n")
		}
		if !reported {
			t.Fatalf("a scrape with Redis silent has no palace_redis_reachable 0:\n%s", body)
		}
	}
}
