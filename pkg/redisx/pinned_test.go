package redisx

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/redistest"
)

// forwardTo listens on laddr and forwards every connection to target
// (a published port, a port-forward). It is closed with the test; a test
// on a host without that loopback address is skipped.
func forwardTo(t *testing.T, laddr, target string) string {
	t.Helper()
	l, err := net.Listen("tcp", laddr)
	if err != nil {
		t.Skipf("listen %s: %v", laddr, err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
				_, _ = io.Copy(c, u)
			})
		}
	})
	return l.Addr().String()
}

// TestAOneMasterClusterAnnouncingAnAddressThatHangsIsReached: the node
// announces an address where connections hang rather than being refused
// (an internal container address seen from another host, dropped by a
// firewall). The attempt at a cluster client following CLUSTER SLOTS uses
// up its 5 s; the client pinned to the given address was then pinged
// with a context taken before that attempt, by then expired, and New
// failed though the node serves every key there.
func TestAOneMasterClusterAnnouncingAnAddressThatHangsIsReached(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 1)
	// Silent: accepts, never answers.
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(hang.Addr().String())
	node := cl.Nodes[0].Client(t)
	for k, v := range map[string]string{"cluster-announce-ip": "127.0.0.1", "cluster-announce-port": port} {
		if err := node.ConfigSet(ctx, k, v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	rdb, err := New(ctx, cl.Nodes[0].Addr)
	if err != nil {
		t.Fatalf("New(%q) of a one-master cluster serving every slot at this address, announcing one that hangs: %v (after %v)",
			cl.Nodes[0].Addr, err, time.Since(start).Round(time.Millisecond))
	}
	defer rdb.Close()
	if err := rdb.Set(ctx, redistest.Prefix(t)+"{g:1}", 1, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestAOneMasterClusterGivenAtAnotherLoopbackAddressIsWrittenThere: the
// node is reached through a forward on 127.0.0.2:P (a port-forward bound
// to a loopback address of its own), and another Redis, a one-master
// cluster of its own, listens at 127.0.0.1:P. The pinned slot map names
// 127.0.0.2:P; go-redis, given a slot map without an origin, rewrites a
// loopback node address to ":P", which dials 127.0.0.1:P: the other Redis
// got the writes meant for the one New was given.
func TestAOneMasterClusterGivenAtAnotherLoopbackAddressIsWrittenThere(t *testing.T) {
	ctx := context.Background()
	mine := redistest.NewCluster(t, 1)
	other := redistest.NewCluster(t, 1) // at 127.0.0.1:P
	mnode := mine.Nodes[0].Client(t)
	redistest.AnnounceElsewhere(t, mine.Nodes[0])
	_, p, _ := net.SplitHostPort(other.Nodes[0].Addr)
	given := forwardTo(t, net.JoinHostPort("127.0.0.2", p), mine.Nodes[0].Addr)
	rdb, err := New(ctx, given)
	if err != nil {
		t.Fatalf("New(%q): %v", given, err)
	}
	defer rdb.Close()
	key := redistest.Prefix(t) + "{g:review}"
	if err := rdb.Set(ctx, key, "x", time.Minute).Err(); err != nil {
		t.Fatalf("set through %T at %s: %v", rdb, given, err)
	}
	onMine := mnode.Exists(ctx, key).Val()
	onOther := other.Nodes[0].Client(t).Exists(ctx, key).Val()
	if onMine != 1 {
		t.Fatalf("New(%q) (a forward to %s): a key written is on that Redis %d times, on the other Redis at 127.0.0.1:%s %d times",
			given, mine.Nodes[0].Addr, onMine, p, onOther)
	}
}

// TestAOneMasterClusterGivenAtTheIPv6LoopbackIsReached: the node given as
// [::1]:P (a port-forward on the IPv6 loopback): the pinned address became
// ":P", which dials 127.0.0.1, where nothing listens.
func TestAOneMasterClusterGivenAtTheIPv6LoopbackIsReached(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 1)
	redistest.AnnounceElsewhere(t, cl.Nodes[0])
	given := forwardTo(t, "[::1]:0", cl.Nodes[0].Addr)
	rdb, err := New(ctx, given)
	if err != nil {
		t.Fatalf("New(%q) of a one-master cluster at a forward on the IPv6 loopback: %v", given, err)
	}
	defer rdb.Close()
	if err := rdb.Set(ctx, redistest.Prefix(t)+"{g:1}", 1, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
}
