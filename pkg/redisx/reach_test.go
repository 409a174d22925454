package redisx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
)

// TestWritableSeesWritesRefusedWherePingsAnswer: a full Redis and a
// read-only replica answer pings, yet take no write; Writable says so,
// of a lone server and of a cluster's master, and says no more once they
// take writes again.
func TestWritableSeesWritesRefusedWherePingsAnswer(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Own(t, "--maxmemory-policy", "noeviction")
	rdb := srv.Client(t)
	cl := redistest.NewCluster(t, 2)
	crdb := cl.Client(t)
	master, err := crdb.MasterForKey(ctx, "{writable}")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		client   redis.UniversalClient
		node     *redis.Client
		refuse   [][]any
		takeBack [][]any
	}{
		{"a full redis", rdb, rdb, [][]any{{"config", "set", "maxmemory", "1"}}, [][]any{{"config", "set", "maxmemory", "0"}}},
		{"a read-only replica", rdb, rdb, [][]any{{"replicaof", "127.0.0.1", "1"}}, [][]any{{"replicaof", "no", "one"}}},
		{"a primary short of replicas", rdb, rdb, [][]any{{"config", "set", "min-replicas-to-write", "1"}}, [][]any{{"config", "set", "min-replicas-to-write", "0"}}},
		{"a cluster with a full master", crdb, master, [][]any{{"config", "set", "maxmemory-policy", "noeviction"}, {"config", "set", "maxmemory", "1"}}, [][]any{{"config", "set", "maxmemory", "0"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			do := func(cmds [][]any) {
				t.Helper()
				for _, args := range cmds {
					if err := c.node.Do(ctx, args...).Err(); err != nil {
						t.Fatal(args, err)
					}
				}
			}
			if err := Writable(ctx, c.client); err != nil {
				t.Fatalf("before: %v", err)
			}
			do(c.refuse)
			if err := Reach(ctx, c.client); err != nil {
				t.Fatalf("the ping: %v; want an answer", err)
			}
			if err := Writable(ctx, c.client); !WritesRefused(err) {
				t.Fatalf("refusing writes: %v; want them refused", err)
			}
			do(c.takeBack)
			if err := Writable(ctx, c.client); err != nil {
				t.Fatalf("taking writes again: %v", err)
			}
		})
	}
}

// TestWritableOfAServerWithoutScriptFlagsIsItsPing: the in-process Redis
// knows no shebang: it is writable when it answers a ping, and out of
// reach when it does not.
func TestWritableOfAServerWithoutScriptFlagsIsItsPing(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	if err := rdb.Eval(ctx, writableScript, nil).Err(); err == nil {
		t.Fatal("the in-process Redis ran a script with a shebang: this test no longer tests what Writable does without")
	}
	if err := Writable(ctx, rdb); err != nil {
		t.Fatalf("a server that answers pings: %v", err)
	}
	mr.Close()
	if err := Writable(ctx, rdb); err == nil || WritesRefused(err) || !OutOfReach(err) {
		t.Fatalf("a server closed: %v; want it out of reach", err)
	}
}

// redisError is an answer of Redis, as the client hands it on.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

// TestWritesRefused: the refusals of a Redis that answers, through
// wrapping; not the errors of one out of reach, nor of the request.
func TestWritesRefused(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{redisError("READONLY You can't write against a read only replica."), true},
		{redisError("OOM command not allowed when used memory > 'maxmemory'."), true},
		{redisError("NOREPLICAS Not enough good replicas to write."), true},
		{redisError("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk."), true},
		{fmt.Errorf("commit: %w", redisError("OOM command not allowed when used memory > 'maxmemory'. script: 0123")), true},
		{redisError("LOADING Redis is loading the dataset in memory"), false},
		{redisError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{errors.New("OOM in a message that is no answer of Redis"), false},
		{io.EOF, false},
		{nil, false},
	} {
		if got := WritesRefused(c.err); got != c.want {
			t.Errorf("WritesRefused(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
