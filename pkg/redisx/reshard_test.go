package redisx

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
)

// TestWriteFollowsASlotThatMoves: an operator reshards the cluster (redis-cli
// --cluster reshard) while the services run. A write that waits for
// replicas runs on one master's connection, which answers MOVED once the
// key's slot has moved and ASK while the slot is moving and the key has
// left; it must reach the slot's new master at once, not fail until the
// client's next reload of its map of the slots.
func TestWriteFollowsASlotThatMoves(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 2)
	// A client of go-redis' defaults, which reloads its map once a minute:
	// what is tested is the write's own handling of the redirection.
	rdb := cl.Client(t)
	// The masters have no replicas: a write that ran on the right master
	// is refused confirmation, one that did not fails otherwise.
	r := Replication{Replicas: 1, Timeout: 10 * time.Millisecond}
	const key = "{reshard}"
	write := func(v string) error {
		return r.Write(ctx, rdb, key, func(c redis.Cmdable) error { return c.Set(ctx, key, v, 0).Err() })
	}
	if err := write("before"); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("write before the move: %v, want ErrNotReplicated", err)
	}
	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	master, err := rdb.MasterForKey(ctx, key)
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
	// Half way: the slot is moving and the key has left (ASK). The write
	// waits for the move to end, and lands on the new master.
	do(dstc, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
	do(srcc, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)
	host, port, _ := net.SplitHostPort(dst.Addr)
	do(srcc, "MIGRATE", host, port, "", 0, 5000, "KEYS", key)
	done := make(chan error, 1)
	go func() { done <- write("moving") }()
	select {
	case err := <-done:
		t.Fatalf("write while the slot moves ended before the move did: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	for _, c := range []*redis.Client{dstc, srcc} {
		do(c, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
	}
	if err := <-done; !errors.Is(err, ErrNotReplicated) {
		t.Errorf("write while the slot moves: %v, want ErrNotReplicated", err)
	}
	if v, err := dstc.Get(ctx, key).Result(); v != "moving" {
		t.Errorf("the slot's new master holds %q (%v), want the write made while it moved", v, err)
	}
	// Moved back whole: the client's map names the master it just found,
	// which answers MOVED.
	do(srcc, "CLUSTER", "SETSLOT", slot, "IMPORTING", dstID)
	do(dstc, "CLUSTER", "SETSLOT", slot, "MIGRATING", srcID)
	host, port, _ = net.SplitHostPort(src.Addr)
	do(dstc, "MIGRATE", host, port, "", 0, 5000, "KEYS", key)
	for _, c := range []*redis.Client{srcc, dstc} {
		do(c, "CLUSTER", "SETSLOT", slot, "NODE", srcID)
	}
	if err := write("after"); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("write after the move back: %v, want ErrNotReplicated", err)
	}
	if v, err := srcc.Get(ctx, key).Result(); v != "after" {
		t.Errorf("the slot's master holds %q (%v), want the write made after the move back", v, err)
	}
}

// TestTransactionFollowsASlotThatMoves: a write that is a transaction
// (MULTI/EXEC) of a key its slot's old master lacks is aborted whole
// (EXECABORT) while the slot moves, the redirection only in the answer
// to the command queued; it too must land on the new master.
func TestTransactionFollowsASlotThatMoves(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 2)
	rdb := cl.Client(t)
	r := Replication{Replicas: 1, Timeout: 10 * time.Millisecond}
	const key = "{reshard}:new"
	master, err := rdb.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
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
	done := make(chan error, 1)
	go func() {
		done <- r.Write(ctx, rdb, key, func(c redis.Cmdable) error {
			_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.HSet(ctx, key, "f", "v")
				p.Expire(ctx, key, time.Minute)
				return nil
			})
			return err
		})
	}()
	select {
	case err := <-done:
		t.Fatalf("transaction while the slot moves ended before the move did: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	for _, c := range []*redis.Client{dstc, srcc} {
		do(c, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
	}
	if err := <-done; !errors.Is(err, ErrNotReplicated) {
		t.Errorf("transaction while the slot moves: %v, want ErrNotReplicated", err)
	}
	if v, err := dstc.HGet(ctx, key, "f").Result(); v != "v" {
		t.Errorf("the slot's new master holds %q (%v), want the transaction's write", v, err)
	}
}

// TestAWriteThatFindsNoMasterDoesNotNameItsKey: a write waiting for
// replicas on a cluster client that could not learn its slots named its
// key in the error, which the services log, and some keys name a secret
// (an invite's token).
func TestAWriteThatFindsNoMasterDoesNotNameItsKey(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close() // nothing answers there
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	const secret = "0123456789abcdef0123456789abcdef"
	err = Replication{Replicas: 1, Timeout: time.Second}.Write(context.Background(), c, "mm:{i:"+secret+"}", func(c redis.Cmdable) error {
		return c.Set(context.Background(), "mm:{i:"+secret+"}", 1, 0).Err()
	})
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("Write with no master reachable: %v, want an error not naming the key", err)
	}
}
