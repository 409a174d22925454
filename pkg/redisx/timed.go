package redisx

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// ErrReadUnderWay is TimedReads.Do's answer while an earlier read has not
// come back from Redis.
var ErrReadUnderWay = errors.New("an earlier read of redis has not come back")

// TimedReads runs the reads of Redis behind a metrics scrape, and waits
// for each no longer than its timeout. A context does not bound a
// go-redis call (its ContextTimeoutEnabled is off): a Redis that stalls (a
// frozen host, a link cut without a reset) holds each call for the
// client's read timeout and retries, many seconds. A scrape held past
// Prometheus' timeout fails whole, and palace_redis_reachable, the gauge
// an operator alerts on for exactly that, is never seen.
//
// The read left behind goes on until go-redis gives up; meanwhile Do
// starts no other, so that scrapes during an outage pile up nothing.
type TimedReads struct {
	timeout time.Duration
	busy    atomic.Bool
}

// NewTimedReads returns reads bounded by timeout.
func NewTimedReads(timeout time.Duration) *TimedReads {
	return &TimedReads{timeout: timeout}
}

// Do runs read and returns its error, or an error once the timeout has
// passed or ctx has ended, whichever comes first.
func (t *TimedReads) Do(ctx context.Context, read func(context.Context) error) error {
	_, err := TimedRead(ctx, t, func(ctx context.Context) (struct{}, error) { return struct{}{}, read(ctx) })
	return err
}

// TimedRead is t.Do of a read that returns a value: the value read, or
// an error once the timeout has passed or ctx has ended. A read left
// behind hands its value to nobody.
func TimedRead[T any](ctx context.Context, t *TimedReads, read func(context.Context) (T, error)) (T, error) {
	var zero T
	if !t.busy.CompareAndSwap(false, true) {
		return zero, ErrReadUnderWay
	}
	type result struct {
		v   T
		err error
	}
	// Cancelled on the way out, not once the read is done: a read done
	// before the select below would otherwise end ctx too, and the select
	// might take the read's end for the timeout's.
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	done := make(chan result, 1)
	go func() {
		v, err := read(ctx)
		// Free before the answer is handed over: a read asked for as soon
		// as this one's answer is taken must not be refused as under way.
		t.busy.Store(false)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return zero, fmt.Errorf("redis read: %w", ctx.Err())
	}
}
