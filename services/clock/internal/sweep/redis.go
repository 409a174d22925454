package sweep

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redisx"
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

// renewScript extends each lease of KEYS that the caller (ARGV[1]) still
// holds, to ARGV[2] ms, and returns per key 1 if it did, else 0: a plain
// PEXPIRE could extend a lease another replica took over. On a single
// Redis one run renews every lease of a tick; on a cluster, where a script
// touches one slot, each lease has a run of its own.
var renewScript = redis.NewScript(`
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = 0
  if redis.call('GET', key) == ARGV[1] then
    out[i] = redis.call('PEXPIRE', key, ARGV[2])
  end
end
return out`)

// queueRenewals adds to pipe the renewal of the leases of shards; the
// function returned gives, once pipe has run, the reply for shards[i]: 1
// when renewed, 0 when the lease is no longer id's.
func queueRenewals(ctx context.Context, pipe redis.Pipeliner, rdb redis.UniversalClient, k keys, shards []int, id string, ttlMs int64) func(i int) (int64, error) {
	leases := make([]string, len(shards))
	for i, sh := range shards {
		leases[i] = k.lease(sh)
	}
	// The reply for shards[i] is element at[i] of run[i]'s.
	run := make([]*redis.Cmd, len(shards))
	at := make([]int, len(shards))
	if singleNode(rdb) {
		all := renewScript.Eval(ctx, pipe, leases, id, ttlMs)
		for i := range shards {
			run[i], at[i] = all, i
		}
	} else {
		for i, lease := range leases {
			run[i] = renewScript.Eval(ctx, pipe, []string{lease}, id, ttlMs)
		}
	}
	return func(i int) (int64, error) {
		v, err := run[i].Int64Slice()
		switch {
		case err != nil:
			return 0, err
		case at[i] >= len(v):
			return 0, fmt.Errorf("renew leases: %d replies, none for %s", len(v), leases[i])
		}
		return v[at[i]], nil
	}
}

// singleNode reports whether rdb is one Redis (with or without Sentinel),
// where a script may touch keys of any slot, rather than a cluster.
func singleNode(rdb redis.UniversalClient) bool {
	_, cluster := rdb.(*redis.ClusterClient)
	return !cluster
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

// dueScript reads, at Redis' own time, the due entries of each shard of
// KEYS (earliest first, at most ARGV[i] for KEYS[i]) and the instant of
// its first entry that is not due yet: one reply {time, due, next} per
// key. Deciding due-ness by Redis TIME, the clock the game service checks
// deadlines with, means an entry handed to ExpireDeadline is never "not
// due yet" there (one Redis; see shard.go for Cluster). On a single Redis
// one run reads every shard with something due: a replica reads its shards
// up to fifty times a second, and an in-process Redis (make run) starts a
// new interpreter for every script it runs. On a cluster each shard has a
// run of its own.
var dueScript = redis.NewScript(`
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
	if !singleNode(rdb) {
		return fetchDueEach(ctx, rdb, keys, limits)
	}
	due, errs = make([]dueSet, len(keys)), make([]error, len(keys))
	fail := func(i int, err error) { errs[i] = fmt.Errorf("read due deadlines of %s: %w", keys[i], err) }
	pipe := rdb.TxPipeline()
	clock := pipe.Time(ctx)
	first := make([]*redis.ZSliceCmd, len(keys))
	for i, key := range keys {
		first[i] = pipe.ZRangeWithScores(ctx, key, 0, 0)
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at
	if err := clock.Err(); err != nil {
		for i := range keys {
			fail(i, err)
		}
		return due, errs
	}
	nowMs := clock.Val().UnixMilli()
	var some []int // the shards with an entry due
	for i, c := range first {
		if err := c.Err(); err != nil {
			fail(i, err)
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
	v, err := dueScript.Run(ctx, rdb, someKeys, args...).Slice()
	for j, i := range some {
		if err != nil {
			fail(i, err)
			continue
		}
		due[i], errs[i] = parseDue(keys[i], v, j)
	}
	return due, errs
}

// fetchDueEach reads several shards in one pipeline of a script per
// shard (split by node on Redis Cluster).
func fetchDueEach(ctx context.Context, rdb redis.UniversalClient, keys []string, limits []int) (due []dueSet, errs []error) {
	calls := make([]redisx.ScriptCall, len(keys))
	for i := range keys {
		calls[i] = redisx.ScriptCall{Keys: []string{keys[i]}, Args: []any{limits[i]}}
	}
	cmds := redisx.RunScripts(ctx, rdb, dueScript, calls)
	due, errs = make([]dueSet, len(keys)), make([]error, len(keys))
	for i, c := range cmds {
		v, err := c.Slice()
		if err != nil {
			errs[i] = fmt.Errorf("read due deadlines of %s: %w", keys[i], err)
			continue
		}
		due[i], errs[i] = parseDue(keys[i], v, 0)
	}
	return due, errs
}

// parseDue reads element j of a dueScript reply, key's: its Redis time,
// due entries and next entry.
func parseDue(key string, reply []any, j int) (dueSet, error) {
	var v []any
	if j < len(reply) {
		v, _ = reply[j].([]any)
	}
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
