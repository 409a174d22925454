package sweep

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
)

// TestOneScriptReadsShardsAsTheirOwnScriptsDo: on a single Redis a pass
// reads the shards with something due with one script, and the others
// without any; it must find what a script per shard (the Cluster path)
// finds, limits included.
func TestOneScriptReadsShardsAsTheirOwnScriptsDo(t *testing.T) {
	ctx := context.Background()
	rdb, scripts := countingClient(t)
	prefix := redistest.Prefix(t)
	now := time.Now().UnixMilli()
	keys := make([]string, 5)
	for i := range keys {
		keys[i] = prefix + "dl:{" + strconv.Itoa(i) + "}"
	}
	t.Cleanup(func() { rdb.Del(context.Background(), keys...) })
	add := func(key, member string, at int64) {
		t.Helper()
		if err := rdb.ZAdd(ctx, key, redis.Z{Score: float64(at), Member: member}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Shard 0: three due, one later; shard 1: only later ones; shard 2:
	// empty; shard 3: one due; shard 4: one due and one soon, which is
	// not due yet.
	add(keys[0], "a", now-3000)
	add(keys[0], "b", now-2000)
	add(keys[0], "c", now-1000)
	add(keys[0], "d", now+60_000)
	add(keys[1], "e", now+30_000)
	add(keys[1], "f", now+40_000)
	add(keys[3], "g", now-500)
	add(keys[3], "h", now-400)
	add(keys[4], "i", now-100)
	add(keys[4], "j", now+1500)
	limits := []int{2, 5, 5, 1, 5}

	// Loaded first, so that no NOSCRIPT retry counts as a second script.
	if err := dueScript.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	scripts.n = 0
	one, errsOne := fetchDueMany(ctx, rdb, keys, limits)
	if scripts.n != 1 {
		t.Errorf("reading %d shards, 3 with entries due, ran %d scripts; want 1", len(keys), scripts.n)
	}
	scripts.n = 0
	if idle, errs := fetchDueMany(ctx, rdb, keys[1:3], limits[1:3]); errs[0] != nil || errs[1] != nil ||
		idle[0].members != nil || idle[0].nextMs != now+30_000 || idle[1].members != nil || idle[1].nextMs != 0 {
		t.Errorf("shards with nothing due read as %+v (%v)", idle, errs)
	}
	if scripts.n != 0 {
		t.Errorf("reading shards with nothing due ran %d scripts; want none", scripts.n)
	}
	// A shard that cannot be read fails alone.
	broken := prefix + "dl:{broken}"
	t.Cleanup(func() { rdb.Del(context.Background(), broken) })
	if err := rdb.Set(ctx, broken, "not a zset", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, errs := fetchDueMany(ctx, rdb, []string{keys[1], broken}, []int{5, 5}); errs[0] != nil || got[0].nextMs != now+30_000 || errs[1] == nil {
		t.Errorf("a readable shard beside a broken one: %+v, errors %v; want shard 1 read and the broken one failed", got, errs)
	}
	each, errsEach := fetchDueEach(ctx, rdb, keys, limits)
	// With its due entry gone, shard 4 has nothing due: its entry soon to
	// come needs no script.
	if err := rdb.ZRem(ctx, keys[4], "i").Err(); err != nil {
		t.Fatal(err)
	}
	scripts.n = 0
	if soon, errs := fetchDueMany(ctx, rdb, keys[4:], limits[4:]); errs[0] != nil || soon[0].members != nil || soon[0].nextMs != now+1500 {
		t.Errorf("a shard with an entry soon to come read as %+v (%v)", soon, errs)
	}
	if scripts.n != 0 {
		t.Errorf("reading a shard with nothing due yet ran %d scripts; want none", scripts.n)
	}
	want := []struct {
		members []string
		nextMs  int64
	}{
		{[]string{"a", "b"}, now + 60_000},
		{nil, now + 30_000},
		{nil, 0},
		{[]string{"g"}, 0},
		{[]string{"i"}, now + 1500},
	}
	for name, got := range map[string][]dueSet{"one script": one, "a script per shard": each} {
		errs := errsOne
		if name != "one script" {
			errs = errsEach
		}
		for i, w := range want {
			if errs[i] != nil {
				t.Fatalf("%s, shard %d: %v", name, i, errs[i])
			}
			g := got[i]
			if !slices.Equal(g.members, w.members) || g.nextMs != w.nextMs {
				t.Errorf("%s, shard %d: due %v next %d; want due %v next %d", name, i, g.members, g.nextMs, w.members, w.nextMs)
			}
			if d := g.nowMs - now; d < -1000 || d > 5000 {
				t.Errorf("%s, shard %d: Redis time %d is %d ms from the test's", name, i, g.nowMs, d)
			}
		}
	}
}

// countingClient is a client of a single real Redis that counts the
// scripts it sends.
func countingClient(t *testing.T) (*redis.Client, *scriptCounter) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	scripts := &scriptCounter{}
	rdb.AddHook(scripts)
	return rdb, scripts
}

// scriptCounter counts the scripts a client sends (EVAL and EVALSHA).
type scriptCounter struct{ n int }

func (c *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *scriptCounter) count(cmd redis.Cmder) {
	if n := cmd.Name(); n == "evalsha" || n == "eval" {
		c.n++
	}
}

// TestOneScriptRenewsOnlyTheLeasesHeld: on a single Redis a tick renews
// every lease with one script, and only those the replica still holds.
func TestOneScriptRenewsOnlyTheLeasesHeld(t *testing.T) {
	ctx := context.Background()
	rdb, scripts := countingClient(t)
	k := keys{prefix: redistest.Prefix(t)}
	shards := []int{0, 1, 2, 3}
	t.Cleanup(func() {
		for _, sh := range shards {
			rdb.Del(context.Background(), k.lease(sh))
		}
	})
	for sh, holder := range map[int]string{0: "me", 1: "other", 3: "me"} {
		if err := rdb.Set(ctx, k.lease(sh), holder, time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	pipe := rdb.Pipeline()
	scripts.n = 0
	renewed := queueRenewals(ctx, pipe, rdb, k, shards, "me", 60_000)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if scripts.n != 1 {
		t.Errorf("renewing %d leases ran %d scripts; want 1", len(shards), scripts.n)
	}
	for i, sh := range shards {
		want := int64(0)
		if sh == 0 || sh == 3 {
			want = 1
		}
		got, err := renewed(i)
		if err != nil || got != want {
			t.Errorf("lease %d: renewed %d (%v); want %d", sh, got, err, want)
		}
		ttl := rdb.PTTL(ctx, k.lease(sh)).Val()
		switch {
		case want == 1 && ttl < 50*time.Second:
			t.Errorf("lease %d held by this replica has %v to live; want it renewed to a minute", sh, ttl)
		case sh == 1 && ttl > time.Second:
			t.Errorf("lease %d held by another replica has %v to live; want its own second", sh, ttl)
		case sh == 2 && ttl != -2*time.Nanosecond:
			t.Errorf("lease %d held by nobody exists now (ttl %v)", sh, ttl)
		}
	}
}
