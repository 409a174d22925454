package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name the Sentinel of NewSentinel monitors.
const SentinelMaster = "palace"

// Sentinel is a master with replicas and one Sentinel watching them, for
// tb alone: kill the master and the Sentinel promotes a replica, as in
// production, within about two seconds.
type Sentinel struct {
	Master   *Server
	Replicas []*Server
	// Addr is the Sentinel's own address.
	Addr string
}

// NewSentinel starts a master, n replicas of it and a Sentinel that fails
// over after the master has not answered for half a second, and returns
// once the Sentinel knows every replica.
func NewSentinel(tb testing.TB, n int) *Sentinel {
	tb.Helper()
	st := &Sentinel{Master: Own(tb)}
	for range n {
		st.Replicas = append(st.Replicas, Replica(tb, st.Master.Addr))
	}
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	host, mport, _ := net.SplitHostPort(st.Master.Addr)
	conf := filepath.Join(tb.TempDir(), "sentinel.conf")
	// Sentinel rewrites its file as the roles change, so it gets one of
	// its own.
	body := fmt.Sprintf("port %[1]d\nbind 127.0.0.1\nsentinel monitor %[2]s %[3]s %[4]s 1\n"+
		"sentinel down-after-milliseconds %[2]s 500\nsentinel failover-timeout %[2]s 5000\nsentinel parallel-syncs %[2]s %[5]d\n",
		port, SentinelMaster, host, mport, n)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		tb.Fatal(err)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), bin: serverBinary(tb), argv: []string{conf, "--sentinel"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.start(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.kill)
	st.Addr = s.Addr
	if err := st.waitReplicasKnown(ctx, n); err != nil {
		tb.Fatal(err)
	}
	return st
}

func (st *Sentinel) waitReplicasKnown(ctx context.Context, n int) error {
	c := redis.NewSentinelClient(&redis.Options{Addr: st.Addr})
	defer c.Close()
	for {
		rs, err := c.Replicas(ctx, SentinelMaster).Result()
		if err == nil && len(rs) == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sentinel %s knows %d replicas of %d (%v): %w", st.Addr, len(rs), n, err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// URL is the address as Palace's --redis-addr takes it.
func (st *Sentinel) URL() string { return "redis-sentinel://" + SentinelMaster + "@" + st.Addr }
