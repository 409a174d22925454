package redistest

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClockApart is a client hook that shifts every TIME reply by its
// duration: a Redis whose clock runs that far ahead of (or, negative,
// behind) the clocks of the hosts whose processes use it.
type ClockApart time.Duration

func (d ClockApart) DialHook(next redis.DialHook) redis.DialHook { return next }

func (d ClockApart) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		d.shift(cmd)
		return err
	}
}

func (d ClockApart) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			d.shift(c)
		}
		return err
	}
}

func (d ClockApart) shift(c redis.Cmder) {
	if t, ok := c.(*redis.TimeCmd); ok && t.Err() == nil {
		t.SetVal(t.Val().Add(time.Duration(d)))
	}
}
