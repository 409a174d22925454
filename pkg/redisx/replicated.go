package redisx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated means a write reached the master but fewer replicas
// than asked for confirmed it in time. It may still be lost in a failover,
// or it may survive: whoever finds it later must confirm it again before
// treating it as kept.
var ErrNotReplicated = errors.New("not confirmed by enough Redis replicas")

// Replication asks that writes be held by replicas, not only by the
// master, before they are acknowledged. Redis replicates asynchronously:
// a master that dies right after answering takes its latest writes with
// it, and a failover (Sentinel, Cluster) promotes a replica without them.
type Replication struct {
	// Replicas is how many replicas must confirm; 0 acknowledges what the
	// master has.
	Replicas int
	// Timeout bounds the wait for them.
	Timeout time.Duration
}

// Validate reports a setting Redis cannot honour.
func (r Replication) Validate() error {
	switch {
	case r.Replicas < 0:
		return errors.New("replicas to wait for must not be negative")
	case r.Replicas > 0 && r.Timeout <= 0:
		// WAIT with a timeout of 0 blocks for ever.
		return errors.New("the wait for replicas needs a positive timeout")
	}
	return nil
}

// Write runs write against the master that holds key and then, when
// replicas are asked for, waits until they hold everything written so far
// on that connection (WAIT). Replication is one ordered stream per master,
// so the wait also covers writes to other keys of that master made
// earlier by anyone, as long as this connection wrote after them: a
// write-less write func confirms nothing.
//
// Without replicas asked for, write gets rdb itself. On a Redis Cluster
// whose slots are being moved, write may be run more than once
// (writeCluster).
func (r Replication) Write(ctx context.Context, rdb redis.UniversalClient, key string, write func(redis.Cmdable) error) error {
	if r.Replicas <= 0 {
		return write(rdb)
	}
	switch c := rdb.(type) {
	case *redis.Client:
		return r.writeOn(ctx, c, write)
	case *redis.ClusterClient:
		return r.writeCluster(ctx, c, key, write)
	default:
		return fmt.Errorf("waiting for replicas is not available for a %T", rdb)
	}
}

// clusterMoves bounds the MOVED redirections a write on a cluster
// follows, as go-redis' MaxRedirects does for its own commands, and
// clusterMoving how long it waits for a slot that is moving.
const (
	clusterMoves  = 3
	clusterMoving = 2 * time.Second
)

// writeCluster is Write on the master of key's slot. That master's
// connection does not follow redirections as the cluster client's commands
// do: while an operator reshards (redis-cli --cluster reshard), it answers
// ASK, or TRYAGAIN for a script whose keys the move split, while key's
// slot is moving, and MOVED once the slot has gone (a transaction fails
// whole, EXECABORT); and the client's map of the slots is reloaded only
// every few seconds. Any of these means the command answered so was not
// run, and write is run again, until the slot has moved and then on its
// new master. The commands of write before it may have run, though: a
// WriteCovering whose write ran on keys the old master still held has its
// scratch key refused while the slot moves, and its write is run again
// each time, to be confirmed on the new master. So write must be one that
// a caller's retry may run again (a script that remembers what it did),
// never one that adds each time it runs.
func (r Replication) writeCluster(ctx context.Context, c *redis.ClusterClient, key string, write func(redis.Cmdable) error) error {
	moves := 0
	wait := 5 * time.Millisecond
	for deadline := time.Now().Add(clusterMoving); ; {
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return fmt.Errorf("find the master of a key's slot: %w", err) // the key may name a secret (an invite's token)
		}
		err = r.writeOn(ctx, node, write)
		if redis.IsExecAbortError(err) {
			// A transaction hears of a redirection only in the answer to
			// the command queued, and fails whole with EXECABORT: a read
			// of two keys of the slot tells whether it moves.
			if perr := probeSlot(ctx, node, key); isRedirection(perr) {
				err = perr
			}
		}
		if addr, ok := redis.IsMovedError(err); ok && moves < clusterMoves {
			moves++
			// Only a reload of the map makes MasterForKey, and the
			// cluster client's own commands, find the slot's master.
			c.ReloadState(ctx)
			if err := awaitMaster(ctx, c, key, addr); err != nil {
				return err
			}
			continue
		}
		if _, ask := redis.IsAskError(err); !ask && !redis.IsTryAgainError(err) || time.Now().After(deadline) {
			return err
		}
		// Moving a slot takes moments: the keys of one game, a pool or
		// a shard move together, and the slot is then the new master's.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// probeSlot reads two keys of key's slot that never exist: a master that
// is moving the slot answers ASK (TRYAGAIN when it receives it), and one
// that no longer holds it MOVED.
func probeSlot(ctx context.Context, node *redis.Client, key string) error {
	k, err := coverKey(key)
	if err != nil {
		return err
	}
	return node.Exists(ctx, k+":moving:1", k+":moving:2").Err()
}

func isRedirection(err error) bool {
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	return moved || ask || redis.IsTryAgainError(err)
}

// awaitMaster waits, briefly, until c's map of the slots names addr the
// master of key, after a reload was asked for.
func awaitMaster(ctx context.Context, c *redis.ClusterClient, key, addr string) error {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		if m, err := c.MasterForKey(ctx, key); err == nil && m.Options().Addr == addr {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil // the next attempt tells
}

// writeOn runs write and then WAIT on one connection of node.
func (r Replication) writeOn(ctx context.Context, node *redis.Client, write func(redis.Cmdable) error) error {
	// WAIT counts the writes of its own connection, so both run on one.
	// They are not pipelined: a pipeline reads with the client's read
	// timeout, which WAIT may outlast.
	conn := node.Conn()
	defer func() { _ = conn.Close() }()
	if err := write(conn); err != nil {
		return err
	}
	n, err := conn.Wait(ctx, r.Replicas, r.Timeout).Result()
	var refused redis.Error
	if errors.As(err, &refused) {
		// Redis ends a WAIT when its master is made a replica in a
		// failover (UNBLOCKED), and refuses one on a replica: the write
		// may or may not survive, as when the wait times out.
		return fmt.Errorf("%w: Redis answered the wait for %d replicas: %v", ErrNotReplicated, r.Replicas, err)
	}
	if err != nil {
		return fmt.Errorf("wait for %d Redis replicas: %w", r.Replicas, err)
	}
	if int(n) < r.Replicas {
		return fmt.Errorf("%w: %d of %d within %v", ErrNotReplicated, n, r.Replicas, r.Timeout)
	}
	return nil
}

// WriteCovering is Write for a call whose answer may rest on writes that
// other connections made: a retry answered with what an earlier attempt
// stored, or a state that another call set and this one only read. WAIT
// counts only its own connection's writes, and a call that writes nothing
// would confirm nothing; so after write, a scratch key in key's hash slot
// is written, and the wait then covers everything that master had before
// it, whoever wrote it. key must hold a hash tag, or no braces at all.
//
// Without replicas asked for, it is Write: no scratch key.
func (r Replication) WriteCovering(ctx context.Context, rdb redis.UniversalClient, key string, write func(redis.Cmdable) error) error {
	if r.Replicas <= 0 {
		return write(rdb)
	}
	scratch, err := coverKey(key)
	if err != nil {
		return err
	}
	return r.Write(ctx, rdb, key, func(c redis.Cmdable) error {
		if err := write(c); err != nil {
			return err
		}
		// Short-lived: it only has to reach the replication stream.
		return c.Set(ctx, scratch, "", time.Minute).Err()
	})
}

// coverKey is a key of key's hash slot, for WriteCovering's scratch write.
func coverKey(key string) (string, error) {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			return key + ":cover", nil // the tag decides the slot
		}
	}
	if strings.ContainsAny(key, "{}") {
		return "", fmt.Errorf("key %q has braces but no hash tag: no scratch key of its slot can be named", key)
	}
	// A key without a tag hashes whole, as does the tag {key}.
	return "{" + key + "}:cover", nil
}

// WarnIfShort logs a warning when fewer replicas are connected than r
// asks for. Replicas may connect later, so this is no reason to stop; but
// an operator should hear at once why every write that waits would fail.
func (r Replication) WarnIfShort(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) {
	if r.Replicas <= 0 {
		return
	}
	if n, err := ConnectedReplicas(ctx, rdb); err != nil || n < r.Replicas {
		log.Warn("fewer Redis replicas connected than --redis-wait-replicas: writes that wait for them fail with Unavailable until they connect",
			"connected", n, "wait_for", r.Replicas, "err", err)
	}
}

// ConnectedReplicas returns how many replicas are connected to the master
// (on a cluster, the fewest of any master), so that a process asked to
// wait for replicas can say at start that its commands will fail.
func ConnectedReplicas(ctx context.Context, rdb redis.UniversalClient) (int, error) {
	count := func(c *redis.Client) (int, error) {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return 0, fmt.Errorf("redis replication info: %w", err)
		}
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
				return strconv.Atoi(v)
			}
		}
		return 0, nil // a server that names no replicas has none
	}
	switch c := rdb.(type) {
	case *redis.Client:
		return count(c)
	case *redis.ClusterClient:
		var mu sync.Mutex
		fewest := -1
		err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			n, err := count(m)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			if fewest < 0 || n < fewest {
				fewest = n
			}
			return nil
		})
		return max(fewest, 0), err
	}
	return 0, fmt.Errorf("replicas of a %T are not known", rdb)
}
