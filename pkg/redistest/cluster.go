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

// Cluster is a Redis Cluster of one test's own: masters, the slots split
// evenly between them, so that the keys of different games live on
// different servers as in production, and replicas if asked for.
type Cluster struct {
	Nodes []*Server
	// Replicas, after AddReplicas: Replicas[i] replicates Nodes[i].
	Replicas []*Server
	bin      string
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
	c := &Cluster{bin: bin}
	for range n {
		s, bus := c.node(ctx, tb)
		c.Nodes = append(c.Nodes, s)
		if err := c.join(ctx, len(c.Nodes)-1, n, bus); err != nil {
			tb.Fatal(err)
		}
	}
	if err := c.waitFormed(ctx, len(c.Nodes)); err != nil {
		tb.Fatal(err)
	}
	return c
}

// AnnounceElsewhere makes node, a node of a cluster, announce a loopback
// address where nothing listens (its port refuses connections), as a node
// reached through a published or forwarded port does: the address a client
// reaches it at is not the one it names in CLUSTER SLOTS.
func AnnounceElsewhere(tb testing.TB, node *Server) {
	tb.Helper()
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	c := node.Client(tb)
	for _, kv := range [][2]string{{"cluster-announce-ip", "127.0.0.1"}, {"cluster-announce-port", strconv.Itoa(port)}} {
		if err := c.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			tb.Fatal(err)
		}
	}
}

// node starts one cluster node, not yet part of the cluster.
func (c *Cluster) node(ctx context.Context, tb testing.TB) (s *Server, bus int) {
	tb.Helper()
	dir := tb.TempDir()
	s, err := startOnFreePorts(ctx, func() (*Server, error) {
		// The cluster bus gets a port of its own: the default, the client
		// port plus 10000, may be taken or beyond 65535.
		var err error
		if bus, err = freePort(); err != nil {
			return nil, err
		}
		return newServer(c.bin, dir, "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-node-timeout", "5000", "--cluster-config-file", "nodes.conf", "--repl-diskless-sync-delay", "0")
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.kill)
	return s, bus
}

// AddReplicas gives every master a replica and returns once each master
// has had a replica confirm a write (WAIT).
func (c *Cluster) AddReplicas(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := redis.NewClient(&redis.Options{Addr: c.Nodes[0].Addr})
	defer first.Close()
	for _, m := range c.Nodes {
		master := redis.NewClient(&redis.Options{Addr: m.Addr})
		id, err := master.ClusterMyID(ctx).Result()
		_ = master.Close()
		if err != nil {
			tb.Fatalf("cluster node %s: %v", m.Addr, err)
		}
		s, bus := c.node(ctx, tb)
		host, port, _ := net.SplitHostPort(s.Addr)
		if err := first.Do(ctx, "CLUSTER", "MEET", host, port, bus).Err(); err != nil {
			tb.Fatalf("cluster meet %s: %v", s.Addr, err)
		}
		if err := c.replicate(ctx, s, id); err != nil {
			tb.Fatal(err)
		}
		c.Replicas = append(c.Replicas, s)
	}
	if err := c.waitFormed(ctx, len(c.Nodes)+len(c.Replicas)); err != nil {
		tb.Fatal(err)
	}
	for i, m := range c.Nodes {
		if err := waitFollowing(ctx, m.Addr, c.Replicas[i].Addr); err != nil {
			tb.Fatal(err)
		}
	}
}

// replicate makes s a replica of the master with node id, once s has
// learnt of that node.
func (c *Cluster) replicate(ctx context.Context, s *Server, id string) error {
	node := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer node.Close()
	for {
		err := node.Do(ctx, "CLUSTER", "REPLICATE", id).Err()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster node %s cannot replicate %s: %w", s.Addr, id, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
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

// waitFormed waits until every node knows all n nodes and finds all slots
// served.
func (c *Cluster) waitFormed(ctx context.Context, n int) error {
	want := "cluster_known_nodes:" + strconv.Itoa(n)
	for _, s := range append(c.Nodes[:len(c.Nodes):len(c.Nodes)], c.Replicas...) {
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
