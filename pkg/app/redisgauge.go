package app

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/palacehq/palace/pkg/redisx"
)

// Health stays SERVING while Redis is out of reach, on purpose: the
// liveness probes read it, and a Redis outage must not restart every pod
// of the deployment, which would then wait for Redis anyway. So a gauge
// says it instead, read at each scrape, and alerts watch that. The gauges
// that count what lies in Redis (queue depths, tickets waiting) go
// unreported during an outage; this one is 0 then.

// reachTimeout bounds the wait for the ping behind a scrape: a Redis that
// serves answers in a millisecond, and a scrape must not wait out a dial.
const reachTimeout = 500 * time.Millisecond

// registerRedisReachable exports palace_redis_reachable: 1 when Redis
// (every master, on a cluster) answered a ping at the scrape, else 0.
func registerRedisReachable(meter metric.Meter, rdb redis.UniversalClient) error {
	g, err := meter.Int64ObservableGauge("palace_redis_reachable",
		metric.WithDescription("1 when this process reached Redis (every master of a cluster) at the scrape, 0 when not; health stays SERVING through an outage"))
	if err != nil {
		return err
	}
	pings := redisx.NewTimedReads(reachTimeout)
	_, err = meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		var up int64
		if pings.Do(ctx, func(ctx context.Context) error { return redisx.Reach(ctx, rdb) }) == nil {
			up = 1
		}
		o.ObserveInt64(g, up)
		return nil
	}, g)
	return err
}
