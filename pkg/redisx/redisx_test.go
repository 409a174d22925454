package redisx

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/palacehq/palace/pkg/redistest"
)

func TestParseOptions(t *testing.T) {
	tests := []struct {
		name        string
		addr        string
		wantAddrs   []string
		wantCluster bool
		wantMaster  string
		wantDB      int
		wantErr     string
	}{
		{name: "host port", addr: "127.0.0.1:6379", wantAddrs: []string{"127.0.0.1:6379"}},
		{name: "url with db", addr: "redis://localhost:6380/2", wantAddrs: []string{"localhost:6380"}, wantDB: 2},
		{name: "cluster url", addr: "redis-cluster://a:1,b:2,c:3", wantAddrs: []string{"a:1", "b:2", "c:3"}, wantCluster: true},
		{name: "bare list is a cluster", addr: "a:1, b:2", wantAddrs: []string{"a:1", "b:2"}, wantCluster: true},
		{name: "sentinel", addr: "redis-sentinel://mymaster@s1:26379,s2:26379/1", wantAddrs: []string{"s1:26379", "s2:26379"}, wantMaster: "mymaster", wantDB: 1},
		{name: "empty", addr: " ", wantErr: "empty"},
		{name: "unknown scheme", addr: "memcached://x:1", wantErr: "unknown scheme"},
		{name: "sentinel without master", addr: "redis-sentinel://s1:26379", wantErr: "master@"},
		{name: "sentinel bad db", addr: "redis-sentinel://m@s1:1/x", wantErr: "not a number"},
		{name: "cluster without hosts", addr: "redis-cluster://", wantErr: "no host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := ParseOptions(tt.addr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(o.Addrs, tt.wantAddrs) || o.IsClusterMode != tt.wantCluster || o.MasterName != tt.wantMaster || o.DB != tt.wantDB {
				t.Fatalf("got addrs=%v cluster=%v master=%q db=%d", o.Addrs, o.IsClusterMode, o.MasterName, o.DB)
			}
		})
	}
}

func TestNewPingsRealServer(t *testing.T) {
	c, err := New(context.Background(), redistest.Addr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestNewFailsOnUnreachableServer(t *testing.T) {
	// Port 1 on loopback refuses at once.
	if _, err := New(context.Background(), "127.0.0.1:1"); err == nil {
		t.Fatal("New succeeded against a closed port")
	}
}
