package app_test

import (
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/app"
)

// TestABadServiceFlagIsReportedBeforeWaitingForRedis: a service's own
// config check runs before the wait for Redis, so a bad flag is named at
// once, not after --redis-wait with only the Redis error.
func TestABadServiceFlagIsReportedBeforeWaitingForRedis(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()

	var cfg app.Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.RegisterFlags(fs, "127.0.0.1:0")
	if err := fs.Parse([]string{"--redis-addr", dead, "--redis-wait", "1m"}); err != nil {
		t.Fatal(err)
	}
	bad := errors.New("--max-streams must be at least 1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = app.Run(ctx, app.Options{Name: "test", Config: cfg, LogOutput: io.Discard, Checks: []func() error{func() error { return bad }}})
	if !errors.Is(err, bad) {
		t.Fatalf("Run with a bad service flag and no Redis: %v, want the flag's error", err)
	}
}
