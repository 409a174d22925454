package sweep

import (
	"context"
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

// renewManyScript is renewScript over several leases at once, for a
// Redis that is not a cluster (see dueManyScript): one script a tick
// instead of one per shard. It returns one renewScript reply per key.
var renewManyScript = redis.NewScript(`
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = 0
  if redis.call('GET', key) == ARGV[1] then
    out[i] = redis.call('PEXPIRE', key, ARGV[2])
  end
end
return out`)

// queueRenewals adds to pipe the renewal of the leases of shards, with
// one script on a single Redis, else a script per lease; the function
// returned gives, once pipe has run, the reply for shards[i]: 1 when
// renewed, 0 when the lease is no longer id's.
func queueRenewals(ctx context.Context, pipe redis.Pipeliner, rdb redis.UniversalClient, k keys, shards []int, id string, ttlMs int64) func(i int) (int64, error) {
	leases := make([]string, len(shards))
	for i, sh := range shards {
		leases[i] = k.lease(sh)
	}
	if _, cluster := rdb.(*redis.ClusterClient); cluster || len(shards) < 2 {
		each := make([]*redis.Cmd, len(shards))
		for i, lease := range leases {
			each[i] = renewScript.Eval(ctx, pipe, []string{lease}, id, ttlMs)
		}
		return func(i int) (int64, error) { return each[i].Int64() }
	}
	all := renewManyScript.Eval(ctx, pipe, leases, id, ttlMs)
	return func(i int) (int64, error) {
		v, err := all.Int64Slice()
		switch {
		case err != nil:
			return 0, err
		case len(v) != len(shards):
			return 0, fmt.Errorf("renew leases: %d replies for %d leases", len(v), len(shards))
		}
		return v[i], nil
	}
}

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

// dueManyScript is dueScript over several shards at once, for a Redis
// that is not a cluster, where keys of many slots may share a script:
// one script run per pass instead of one per shard. A replica reads its
// shards up to fifty times a second, and an in-process Redis (make run)
// starts a new interpreter for every script it runs. ARGV[i] is the limit
// of KEYS[i]; the reply holds one dueScript reply per key.
var dueManyScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nows = string.format('%d', now)
local out = {}
for i, key in ipairs(KEYS) do
  local due = redis.call('ZRANGEBYSCORE', key, '-inf', nows, 'LIMIT', 0, tonumber(ARGV[i]))
  local nxt = redis.call('ZRANGEBYSCORE', key, '(' .. nows, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  out[i] = {nows, due, nxt[2] or ''}
end
return out`)

// dueSet is one read of a shard.
type dueSet struct {
	nowMs   int64    // Redis time of the read
	members []string // due entries, earliest first
	nextMs  int64    // first entry after now; 0 when none
}

// fetchDueMany reads several shards; errs[i] is the error of shard i. On
// Redis Cluster it runs a script per shard, in one pipeline split by node.
// On a single Redis most passes find nothing due, and plain reads answer
// them: each shard's earliest entry, at Redis' time, in one transaction.
// One script then reads the shards that have something due.
func fetchDueMany(ctx context.Context, rdb redis.UniversalClient, keys []string, limits []int) (due []dueSet, errs []error) {
	if _, cluster := rdb.(*redis.ClusterClient); cluster {
		return fetchDueEach(ctx, rdb, keys, limits)
	}
	due, errs = make([]dueSet, len(keys)), make([]error, len(keys))
	failAll := func(idx []int, err error) {
		for _, i := range idx {
			errs[i] = fmt.Errorf("read due deadlines of %s: %w", keys[i], err)
		}
	}
	pipe := rdb.TxPipeline()
	clock := pipe.Time(ctx)
	first := make([]*redis.ZSliceCmd, len(keys))
	for i, key := range keys {
		first[i] = pipe.ZRangeWithScores(ctx, key, 0, 0)
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at
	if err := clock.Err(); err != nil {
		all := make([]int, len(keys))
		for i := range all {
			all[i] = i
		}
		failAll(all, err)
		return due, errs
	}
	nowMs := clock.Val().UnixMilli()
	var some []int // the shards with an entry due
	for i, c := range first {
		if err := c.Err(); err != nil {
			failAll([]int{i}, err)
			continue
		}
		due[i].nowMs = nowMs
		if z := c.Val(); len(z) > 0 {
			if z[0].Score <= float64(nowMs) {
				some = append(some, i)
			} else {
				due[i].nextMs = int64(z[0].Score)
			}
		}
	}
	if len(some) == 0 {
		return due, errs
	}
	someKeys := make([]string, len(some))
	args := make([]any, len(some))
	for j, i := range some {
		someKeys[j], args[j] = keys[i], limits[i]
	}
	v, err := dueManyScript.Run(ctx, rdb, someKeys, args...).Slice()
	if err == nil && len(v) != len(some) {
		err = fmt.Errorf("%d replies for %d shards", len(v), len(some))
	}
	if err != nil {
		failAll(some, err)
		return due, errs
	}
	for j, i := range some {
		one, _ := v[j].([]any)
		due[i], errs[i] = parseDue(keys[i], one)
	}
	return due, errs
}

// fetchDueEach reads several shards in one pipeline of a script per
// shard (split by node on Redis Cluster).
func fetchDueEach(ctx context.Context, rdb redis.UniversalClient, keys []string, limits []int) (due []dueSet, errs []error) {
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
		v, err := c.Slice()
		if err != nil {
			errs[i] = fmt.Errorf("read due deadlines of %s: %w", keys[i], err)
			continue
		}
		due[i], errs[i] = parseDue(keys[i], v)
	}
	return due, errs
}

// parseDue reads one shard's reply: its Redis time, due entries and next
// entry.
func parseDue(key string, v []any) (dueSet, error) {
	if len(v) != 3 {
		return dueSet{}, fmt.Errorf("read due deadlines of %s: malformed reply", key)
	}
	var out dueSet
	var err error
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
