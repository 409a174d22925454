package redisx

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Reach pings Redis: on a cluster every master, since what lives in a
// slot whose master is out of reach can be neither read nor written.
func Reach(ctx context.Context, rdb redis.UniversalClient) error {
	if err := eachMaster(ctx, rdb, func(ctx context.Context, c redis.Cmdable) error { return c.Ping(ctx).Err() }); err != nil {
		return fmt.Errorf("redis ping: %w", err)
	}
	return nil
}

// eachMaster runs ask on every master of a cluster, or on rdb itself.
func eachMaster(ctx context.Context, rdb redis.UniversalClient, ask func(context.Context, redis.Cmdable) error) error {
	if c, ok := rdb.(*redis.ClusterClient); ok {
		return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return ask(ctx, m) })
	}
	return ask(ctx, rdb)
}

// writableScript writes nothing, but as a script with a shebang and
// without the no-writes and allow-oom flags, Redis (7.0 and later) refuses
// to run it wherever it would refuse a write: on a read-only replica
// (READONLY), at its maxmemory under noeviction (OOM). A ping answers in
// both cases.
const writableScript = "#!lua\nreturn 1"

// Writable asks Redis whether it takes writes now (on a cluster, every
// master), without writing: an error is Redis out of reach, or refusing
// writes (see WritesRefused). A server that knows no script flags (Redis
// before 7.0, or the in-process one) is only pinged.
func Writable(ctx context.Context, rdb redis.UniversalClient) error {
	ask := func(ctx context.Context, c redis.Cmdable) error {
		err := c.Eval(ctx, writableScript, nil).Err()
		if err != nil && !WritesRefused(err) && !OutOfReach(err) {
			// The server answered, but not as Redis 7 would: it knows no
			// shebang, or its user may not run scripts.
			err = c.Ping(ctx).Err()
		}
		return err
	}
	if err := eachMaster(ctx, rdb, ask); err != nil {
		return fmt.Errorf("redis write check: %w", err)
	}
	return nil
}

// WritesRefused reports Redis answering, but refusing writes: a read-only
// replica (a demoted primary, before the client follows the new one), a
// Redis at its maxmemory under noeviction, a primary short of the
// replicas min-replicas-to-write asks for, or one that stopped writes
// after a failed snapshot.
func WritesRefused(err error) bool {
	if redis.IsReadOnlyError(err) {
		return true
	}
	for _, p := range []string{"OOM ", "NOREPLICAS ", "MISCONF "} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}
