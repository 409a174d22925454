package handler

import (
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/auth"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestAnEarlierReleasesBeatIsNoLossOfData: a replica of a release before
// epochs beats by setting its key to 1 every second. Beside it, in a
// rollout or a rollback, a process of this release must not take that
// for Redis losing its data (a warning to the operator, every cache
// dropped), and must still see a real loss.
func TestAnEarlierReleasesBeatIsNoLossOfData(t *testing.T) {
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	ring, _, err := auth.KeyringFromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	h := newRedisHandlerOn(t, rdb, prefix, ring)
	id, _, _ := newXiangqi(t, h)
	ctx := t.Context()
	h.beat(ctx)
	// What an earlier release's beat wrote: SET <prefix>{gamed}:beat 1.
	if err := rdb.Set(ctx, prefix+"{gamed}:beat", 1, 24*time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	h.beat(ctx)
	if h.cache.get(id) == nil {
		t.Fatal("an earlier release's beat made this process drop its cache, as if Redis had lost its data")
	}
	// A real loss still shows.
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	h.beat(ctx)
	if h.cache.get(id) != nil {
		t.Fatal("Redis lost its data and the process kept its cache")
	}
}
