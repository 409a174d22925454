package redistest

import (
	"context"
	"net"
	"sync/atomic"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// KilledAfterWriting is a client hook that fails every command once one
// has written Key (any command naming it but a GET), as a process killed
// right after that write would send nothing more: tests add it to the
// client of the process they kill half-way through a series of writes.
type KilledAfterWriting struct {
	Key  string
	dead atomic.Bool
}

// errKilled is what every command of a killed client gets: a connection
// reset, which callers treat as Redis out of reach.
var errKilled = &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}

func (k *KilledAfterWriting) DialHook(next redis.DialHook) redis.DialHook { return next }

func (k *KilledAfterWriting) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if k.dead.Load() {
			cmd.SetErr(errKilled)
			return errKilled
		}
		err := next(ctx, cmd)
		if k.writes(cmd) {
			k.dead.Store(true)
		}
		return err
	}
}

func (k *KilledAfterWriting) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if k.dead.Load() {
			for _, c := range cmds {
				c.SetErr(errKilled)
			}
			return errKilled
		}
		err := next(ctx, cmds)
		for _, c := range cmds {
			if k.writes(c) {
				k.dead.Store(true)
			}
		}
		return err
	}
}

func (k *KilledAfterWriting) writes(cmd redis.Cmder) bool {
	if cmd.Name() == "get" {
		return false
	}
	for _, a := range cmd.Args()[1:] {
		if a == k.Key {
			return true
		}
	}
	return false
}
