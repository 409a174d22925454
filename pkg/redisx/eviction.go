package redisx

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// EvictionPolicy is the maxmemory-policy of the Redis rdb reaches, and
// whether it evicts keys when full: with a memory limit (maxmemory) and a
// policy other than noeviction. Every key Palace writes has a TTL, so the
// volatile-* policies take them as readily as the allkeys-* ones: a live
// game could lose its state or its event log. With noeviction a full
// Redis refuses writes instead, which clients see and retry. A Redis that
// does not let CONFIG be called (managed services often do not) answers
// an error. On a cluster every master is asked, since CONFIG GET reaches
// one of them: the policy is that of one that evicts, if any does.
func EvictionPolicy(ctx context.Context, rdb redis.UniversalClient) (policy string, evicts bool, err error) {
	var mu sync.Mutex
	err = eachMaster(ctx, rdb, func(ctx context.Context, c redis.Cmdable) error {
		p, e, err := evictionPolicy(ctx, c)
		mu.Lock()
		defer mu.Unlock()
		if err == nil && (policy == "" || e && !evicts) {
			policy, evicts = p, e
		}
		return err
	})
	if err != nil {
		return "", false, err
	}
	return policy, evicts, nil
}

func evictionPolicy(ctx context.Context, c redis.Cmdable) (policy string, evicts bool, err error) {
	m, err := c.ConfigGet(ctx, "maxmemory*").Result()
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
