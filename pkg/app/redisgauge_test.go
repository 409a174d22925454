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
