package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of one test's own: masters without replicas,
// the slots split evenly between them, so that the keys of different games
// live on different servers as in production.
type Cluster struct {
	Nodes []*Server
}

// clusterSlots is the number of hash slots of every Redis Cluster.
const clusterSlots = 16384

// NewCluster starts a cluster of n masters for tb alone on free loopback
// ports and returns once every node serves every slot. Without
// redis-server on PATH tb is skipped, or fails under REDISTEST_REQUIRE.
func NewCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	bin := serverBinary(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := &Cluster{}
	for range n {
		// The cluster bus gets a port of its own: the default, the client
		// port plus 10000, may be taken or beyond 65535.
		bus, err := freePort()
		if err != nil {
			tb.Fatal(err)
		}
		s, err := newServer(bin, tb.TempDir(), "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-node-timeout", "5000", "--cluster-config-file", "nodes.conf")
		if err != nil {
			tb.Fatal(err)
		}
		if err := s.start(ctx); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(s.kill)
		c.Nodes = append(c.Nodes, s)
		if err := c.join(ctx, len(c.Nodes)-1, n, bus); err != nil {
			tb.Fatal(err)
		}
	}
	if err := c.waitFormed(ctx); err != nil {
		tb.Fatal(err)
	}
	return c
}

// join gives node i of n its share of the slots and introduces it to the
// first node.
func (c *Cluster) join(ctx context.Context, i, n, bus int) error {
	node := redis.NewClient(&redis.Options{Addr: c.Nodes[i].Addr})
	defer node.Close()
	lo, hi := i*clusterSlots/n, (i+1)*clusterSlots/n-1
	if err := node.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
		return fmt.Errorf("cluster node %s: slots %d-%d: %w", c.Nodes[i].Addr, lo, hi, err)
	}
	if i == 0 {
		return nil
	}
	host, port, _ := net.SplitHostPort(c.Nodes[i].Addr)
	first := redis.NewClient(&redis.Options{Addr: c.Nodes[0].Addr})
	defer first.Close()
	if err := first.Do(ctx, "CLUSTER", "MEET", host, port, bus).Err(); err != nil {
		return fmt.Errorf("cluster meet %s: %w", c.Nodes[i].Addr, err)
	}
	return nil
}

// waitFormed waits until every node knows every other and finds all slots
// served.
func (c *Cluster) waitFormed(ctx context.Context) error {
	want := "cluster_known_nodes:" + strconv.Itoa(len(c.Nodes))
	for _, s := range c.Nodes {
		node := redis.NewClient(&redis.Options{Addr: s.Addr})
		for {
			info, err := node.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, want+"\r\n") {
				break
			}
			select {
			case <-ctx.Done():
				node.Close()
				return fmt.Errorf("redis cluster did not form: node %s says %q (%v)", s.Addr, info, err)
			case <-time.After(50 * time.Millisecond):
			}
		}
		node.Close()
	}
	return nil
}

func (c *Cluster) addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr
	}
	return addrs
}

// URL is the cluster's address as Palace's --redis-addr takes it.
func (c *Cluster) URL() string { return "redis-cluster://" + strings.Join(c.addrs(), ",") }

// Client returns a cluster client, closed when tb ends.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.addrs()})
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}
