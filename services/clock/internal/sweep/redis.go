package sweep

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Keys next to the game service's deadline index "<prefix>dl:{<shard>}".
// A shard's lease shares the shard's hash tag, so on Redis Cluster both
// live in one slot; the replica set is one small key of its own. No
// script touches more than one key.
type keys struct{ prefix string }

// lease holds the id of the replica that sweeps the shard, with a TTL.
func (k keys) lease(shard int) string { return k.prefix + "dl:lease:{" + strconv.Itoa(shard) + "}" }

// replicas is a sorted set of replica ids scored by their last heartbeat
// (unix ms), from which each replica derives its fair share of shards.
func (k keys) replicas() string { return k.prefix + "clock:replicas" }

// renewScript extends a lease only when the caller still holds it: a
// plain PEXPIRE could extend a lease another replica took over.
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)

// releaseScript deletes a lease only when the caller holds it.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// heartbeatScript records this replica as seen now (Redis TIME, so that
// replicas on hosts with skewed clocks agree), forgets replicas silent for
// ARGV[3] ms and returns those seen within the last ARGV[2] ms.
var heartbeatScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], string.format('%d', now), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now - tonumber(ARGV[3])))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return redis.call('ZRANGEBYSCORE', KEYS[1], string.format('%d', now - tonumber(ARGV[2])), '+inf')`)

// dueScript reads, at Redis' own time, the due entries of a shard
// (earliest first, at most ARGV[1]) and the instant of the first entry
// that is not due yet. Deciding due-ness by Redis TIME, the clock the game
// service checks deadlines with, means an entry handed to ExpireDeadline
// is never "not due yet" there (one Redis; see shard.go for Cluster).
var dueScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nows = string.format('%d', now)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', nows, 'LIMIT', 0, tonumber(ARGV[1]))
local nxt = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. nows, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
return {nows, due, nxt[2] or ''}`)

// dueSet is one read of a shard.
type dueSet struct {
	nowMs   int64    // Redis time of the read
	members []string // due entries, earliest first
	nextMs  int64    // first entry after now; 0 when none
}

// fetchDueMany reads several shards in one pipeline (split by node on
// Redis Cluster); errs[i] is the error of shard i.
func fetchDueMany(ctx context.Context, rdb redis.UniversalClient, keys []string, limits []int) (due []dueSet, errs []error) {
	run := func(idx []int, sha bool) []*redis.Cmd {
		pipe := rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(idx))
		for j, i := range idx {
			if sha {
				cmds[j] = pipe.EvalSha(ctx, dueScript.Hash(), []string{keys[i]}, limits[i])
			} else {
				cmds[j] = dueScript.Eval(ctx, pipe, []string{keys[i]}, limits[i])
			}
		}
		_, _ = pipe.Exec(ctx) // each command's error is looked at
		return cmds
	}
	all := make([]int, len(keys))
	for i := range all {
		all[i] = i
	}
	cmds := run(all, true)
	// A server that has not seen the script yet (or restarted): send it
	// in full once, which also caches it there.
	var missing []int
	for i, c := range cmds {
		if c.Err() != nil && redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		for j, c := range run(missing, false) {
			cmds[missing[j]] = c
		}
	}
	due, errs = make([]dueSet, len(keys)), make([]error, len(keys))
	for i, c := range cmds {
		due[i], errs[i] = parseDue(keys[i], c)
	}
	return due, errs
}

func parseDue(key string, c *redis.Cmd) (dueSet, error) {
	v, err := c.Slice()
	if err != nil {
		return dueSet{}, fmt.Errorf("read due deadlines of %s: %w", key, err)
	}
	if len(v) != 3 {
		return dueSet{}, errors.New("read due deadlines: malformed reply")
	}
	var out dueSet
	now, _ := v[0].(string)
	if out.nowMs, err = strconv.ParseInt(now, 10, 64); err != nil {
		return dueSet{}, fmt.Errorf("read due deadlines: time %q: %w", now, err)
	}
	ms, _ := v[1].([]any)
	for _, m := range ms {
		if s, ok := m.(string); ok {
			out.members = append(out.members, s)
		}
	}
	if next, _ := v[2].(string); next != "" {
		f, err := strconv.ParseFloat(next, 64)
		if err != nil {
			return dueSet{}, fmt.Errorf("read due deadlines: score %q: %w", next, err)
		}
		out.nextMs = int64(f)
	}
	return out, nil
}
