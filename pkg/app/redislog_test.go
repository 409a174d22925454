package app_test

import (
	"context"
	"encoding/json"
	"flag"
	"net"
	"strings"
	"testing"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/apptest"
)

// A daemon's logs stay one JSON record a line when the Redis client has
// something to say: here, that it could not dial.
func TestTheRedisClientLogsThroughTheProcessLogger(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close() // nothing listens there now

	var cfg app.Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.RegisterFlags(fs, "127.0.0.1:0")
	// A short wait: the dial fails, and is logged, at the first try.
	if err := fs.Parse([]string{"--log-format", "json", "--redis-addr", dead, "--redis-wait", "1s"}); err != nil {
		t.Fatal(err)
	}
	// The client's logger outlives the Run: a late line must not race the
	// read below.
	out := &apptest.LogBuffer{}
	err = app.Run(context.Background(), app.Options{Name: "test", Config: cfg, LogOutput: out, OwnsProcess: true})
	if err == nil {
		t.Fatal("Run with no Redis to reach returned no error")
	}
	found := false
	for line := range strings.Lines(out.String()) {
		var rec struct{ Level, Msg, Detail string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		if rec.Msg == "redis client" && rec.Level == "WARN" && strings.Contains(rec.Detail, "failed to dial") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no record of the Redis client's failed dial in:\n%s", out.String())
	}
}
