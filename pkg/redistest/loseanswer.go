package redistest

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// LoseFirstAnswer is a go-redis hook that loses the answer of the first
// script call Match picks, after Redis ran it, as a network fault right
// after the command reached Redis does: it blackholes Proxy, the client
// reaching Redis through it, until Landed reports the script's effect seen
// (or 5 s), then breaks the connection. go-redis, with retries, then sends
// the script again.
type LoseFirstAnswer struct {
	Proxy  *Proxy
	Match  func(args []any) bool
	Landed func() bool
	done   atomic.Bool
}

func (h *LoseFirstAnswer) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *LoseFirstAnswer) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *LoseFirstAnswer) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if (cmd.Name() == "evalsha" || cmd.Name() == "eval") && h.Match(cmd.Args()) && h.done.CompareAndSwap(false, true) {
			h.Proxy.Blackhole()
			go func() {
				for deadline := time.Now().Add(5 * time.Second); !h.Landed() && time.Now().Before(deadline); {
					time.Sleep(5 * time.Millisecond)
				}
				h.Proxy.Restore() // closes the connection whose answer was lost
			}()
		}
		return next(ctx, cmd)
	}
}
