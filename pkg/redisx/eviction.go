package redisx

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// EvictionPolicy is the maxmemory-policy of the Redis rdb reaches, and
// whether it evicts keys when full: with a memory limit (maxmemory) and a
// policy other than noeviction. Every key Palace writes has a TTL, so the
// volatile-* policies take them as readily as the allkeys-* ones: a live
// game could lose its state or its event log. With noeviction a full
// Redis refuses writes instead, which clients see and retry. A Redis that
// does not let CONFIG be called (managed services often do not) answers
// an error.
func EvictionPolicy(ctx context.Context, rdb redis.UniversalClient) (policy string, evicts bool, err error) {
	m, err := rdb.ConfigGet(ctx, "maxmemory*").Result()
	if err != nil {
		return "", false, fmt.Errorf("read maxmemory-policy: %w", err)
	}
	policy, ok := m["maxmemory-policy"]
	limit, limited := m["maxmemory"]
	if !ok || !limited {
		return "", false, fmt.Errorf("read maxmemory-policy: not in the answer %v", m)
	}
	return policy, policy != "noeviction" && limit != "0", nil
}
