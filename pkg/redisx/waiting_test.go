package redisx

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
)

// TestAClientForWaitingHoldsItsCallersBeyondTheUsualPool: its pool is the
// address's (or go-redis' default) plus one connection per caller, and
// its connections are named after the address's client name.
func TestAClientForWaitingHoldsItsCallersBeyondTheUsualPool(t *testing.T) {
	addr := redistest.Addr(t)
	for _, c := range []struct {
		addr, name string
		pool       int
	}{
		{addr, "workers", 10*runtime.GOMAXPROCS(0) + 5},
		{"redis://" + addr + "?pool_size=7&client_name=game", "game-workers", 12},
	} {
		rdb, err := NewForWaiting(context.Background(), c.addr, 5, "workers")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rdb.Close() })
		opts := rdb.(*redis.Client).Options()
		if opts.PoolSize != c.pool {
			t.Errorf("%s: pool of %d, want %d", c.addr, opts.PoolSize, c.pool)
		}
		info, err := rdb.ClientInfo(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if info.Name != c.name {
			t.Errorf("%s: connections named %q, want %q", c.addr, info.Name, c.name)
		}
	}
}

// TestAClientForWaitingSendsNoTakingReadAgain: the AI workers' client sent
// again, on a new connection, a read whose connection broke after Redis
// ran it (go-redis' default retries): the read taking a stream entry
// (XREADGROUP >) took nothing the second time, and the entry the lost
// answer held stayed pending with the caller, which knew nothing of it. The
// caller gets the failure, and looks for what it may hold.
func TestAClientForWaitingSendsNoTakingReadAgain(t *testing.T) {
	ctx := context.Background()
	direct := redistest.Client(t)
	stream := redistest.Prefix(t) + "jobs"
	t.Cleanup(func() { direct.Del(ctx, stream) })
	if err := direct.XGroupCreateMkStream(ctx, stream, "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := direct.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"j", "1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	rdb, err := NewForWaiting(ctx, proxy.Addr(), 1, "workers")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	proxy.Blackhole() // Redis runs what it is sent; its answers are lost
	read := make(chan error, 1)
	go func() {
		_, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "w", Streams: []string{stream, ">"}, Count: 1, Block: -1}).Result()
		read <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		p, err := direct.XPending(ctx, stream, "g").Result()
		if err != nil {
			t.Fatal(err)
		}
		if p.Count == 1 {
			break // taken by the read whose answer is lost
		}
		if time.Now().After(deadline) {
			t.Fatal("the read never reached Redis")
		}
	}
	// The connection breaks before its answer (which the proxy may not
	// have read from Redis yet, to drop) reaches the client.
	proxy.Drop()
	proxy.Restore()
	if err := <-read; err == nil || errors.Is(err, redis.Nil) {
		t.Fatalf("the read whose answer was lost returned %v: it was sent again, which took nothing, and the entry it took is left with the caller unknown", err)
	}
}

// TestAClientForWaitingOnAClusterSendsNoCommandAgain: on a Redis Cluster
// go-redis' cluster client ignored MaxRetries -1: its process loop sent a
// command again after its connection broke, up to MaxRedirects times.
// Here the connection of a blocked XREADGROUP is killed: the read sent
// again blocked anew and took what came next, with no error.
func TestAClientForWaitingOnAClusterSendsNoCommandAgain(t *testing.T) {
	ctx := context.Background()
	c := redistest.NewCluster(t, 1)
	rdb, err := NewForWaiting(ctx, c.URL(), 1, "workers")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		t.Fatalf("client %T, want a cluster client", rdb)
	}
	stream := "{jobs}review"
	if err := rdb.XGroupCreateMkStream(ctx, stream, "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	node := c.Nodes[0].Client(t)
	read := make(chan error, 1)
	go func() {
		_, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "w", Streams: []string{stream, ">"}, Count: 1, Block: 3 * time.Second}).Result()
		read <- err
	}()
	breakBlockedRead(t, node)
	// A job queued after the break: a read sent again takes it.
	time.Sleep(200 * time.Millisecond)
	if err := node.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"j", "1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-read:
		if err == nil || errors.Is(err, redis.Nil) {
			t.Fatalf("the read whose connection broke returned %v: the cluster client sent it again (MaxRetries -1 is not heeded by ClusterClient.process)", err)
		}
	case <-time.After(6 * time.Second):
		t.Fatal("the read whose connection broke never returned")
	}
}

// TestAClientForWaitingOnAClusterSendsNoReadAgainAfterASK: while the slot
// of the AI queue's stream moves (a reshard), a read the old master
// answers ASK is sent to the new one as a pipeline (ASKING and the read),
// which the node clients' hook let by: its connection broken after the
// send, the cluster client sent the read again, which took the next
// entry, with no error, the one the lost answer held left with the caller.
func TestAClientForWaitingOnAClusterSendsNoReadAgainAfterASK(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 2)
	rdb, err := NewForWaiting(ctx, cl.URL(), 1, "workers")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	crdb := rdb.(*redis.ClusterClient)
	const stream = "{jobs}ask"
	if err := rdb.XGroupCreateMkStream(ctx, stream, "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	slot, err := rdb.ClusterKeySlot(ctx, stream).Result()
	if err != nil {
		t.Fatal(err)
	}
	master, err := crdb.MasterForKey(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	src, dst := cl.Nodes[0], cl.Nodes[1]
	if master.Options().Addr != src.Addr {
		src, dst = dst, src
	}
	srcc := redis.NewClient(&redis.Options{Addr: src.Addr})
	dstc := redis.NewClient(&redis.Options{Addr: dst.Addr})
	t.Cleanup(func() { _ = srcc.Close(); _ = dstc.Close() })
	srcID, _ := srcc.ClusterMyID(ctx).Result()
	dstID, _ := dstc.ClusterMyID(ctx).Result()
	do := func(c *redis.Client, args ...any) {
		t.Helper()
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%s %v: %v", c.Options().Addr, args, err)
		}
	}
	do(dstc, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
	do(srcc, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)
	host, port, _ := net.SplitHostPort(dst.Addr)
	do(srcc, "MIGRATE", host, port, "", 0, 5000, "KEYS", stream)

	read := make(chan error, 1)
	go func() {
		_, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "w", Streams: []string{stream, ">"}, Count: 1, Block: 2 * time.Second}).Result()
		read <- err
	}()
	breakBlockedRead(t, dstc) // on the importing master
	time.Sleep(300 * time.Millisecond)
	// A job queued after the break, on the importing master.
	pipe := dstc.Pipeline()
	pipe.Do(ctx, "ASKING")
	pipe.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"j", "1"}})
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-read:
		if err == nil || errors.Is(err, redis.Nil) {
			t.Fatalf("the read whose connection broke after an ASK returned %v: the cluster client sent it again", err)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the read whose connection broke never returned")
	}
}

// breakBlockedRead closes, on node, the connection of a read blocked
// there (XREADGROUP), as a network fault would.
func breakBlockedRead(t *testing.T, node *redis.Client) {
	t.Helper()
	ctx := context.Background()
	var id int64
	for deadline := time.Now().Add(5 * time.Second); id == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the read never blocked")
		}
		list, err := node.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(list, "\n") {
			if strings.Contains(line, "cmd=xreadgroup") {
				for _, f := range strings.Fields(line) {
					if v, ok := strings.CutPrefix(f, "id="); ok {
						id, _ = strconv.ParseInt(v, 10, 64)
					}
				}
			}
		}
	}
	if err := node.ClientKillByFilter(ctx, "ID", strconv.FormatInt(id, 10)).Err(); err != nil {
		t.Fatal(err)
	}
}
