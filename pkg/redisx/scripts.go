package redisx

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// ScriptCall is one run of a script: its keys and arguments.
type ScriptCall struct {
	Keys []string
	Args []any
}

// RunScripts runs script once for each call, in one pipeline (split by
// node on a Redis Cluster), by its hash. A server that has not seen the
// script yet, or restarted, answers NOSCRIPT and runs none of it: those
// calls alone are sent again in full, which caches the script there. On a
// Redis Cluster the others ran on servers that had it, and running them
// again would run them twice. Each call's reply and error are its own.
func RunScripts(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, calls []ScriptCall) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	run := func(idx []int, sha bool) {
		pipe := rdb.Pipeline()
		for _, i := range idx {
			if sha {
				cmds[i] = script.EvalSha(ctx, pipe, calls[i].Keys, calls[i].Args...)
			} else {
				cmds[i] = script.Eval(ctx, pipe, calls[i].Keys, calls[i].Args...)
			}
		}
		_, _ = pipe.Exec(ctx) // each command's error is looked at
	}
	all := make([]int, len(calls))
	for i := range all {
		all[i] = i
	}
	run(all, true)
	var missing []int
	for i, c := range cmds {
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		run(missing, false)
	}
	return cmds
}
