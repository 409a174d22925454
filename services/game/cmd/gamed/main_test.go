package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestBadGameFlagsAreReportedBeforeWaitingForRedis: a bad seat key or
// shard count is reported at once, naming its flag, not hidden behind a
// Redis out of reach until --redis-wait has passed.
func TestBadGameFlagsAreReportedBeforeWaitingForRedis(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"short seat key", []string{"--seat-signing-keys", "k1:00ff"}, "--seat-signing-keys"},
		{"placeholder seat key", []string{"--seat-signing-keys", "placeholder:494e5345435552452d504c414345484f4c4445522d5245504c4143452d4d4521"}, "--seat-signing-keys"},
		{"no deadline shards", []string{"--deadline-shards", "0"}, "--deadline-shards"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			begun := time.Now()
			err := run(ctx, append([]string{"--listen", "127.0.0.1:0", "--redis-addr", dead, "--redis-wait", "1m", "--log-level", "error"}, tt.args...))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("gamed %v, Redis out of reach: after %v: %v; want %s named at once", tt.args, time.Since(begun).Round(100*time.Millisecond), err, tt.want)
			}
		})
	}
}
