package redisx

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Reach pings Redis: on a cluster every master, since what lives in a
// slot whose master is out of reach can be neither read nor written.
func Reach(ctx context.Context, rdb redis.UniversalClient) error {
	var err error
	if c, ok := rdb.(*redis.ClusterClient); ok {
		err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
	} else {
		err = rdb.Ping(ctx).Err()
	}
	if err != nil {
		return fmt.Errorf("redis ping: %w", err)
	}
	return nil
}
