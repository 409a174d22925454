package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// oldAbortLua is abort.lua as the previous release runs it: it names
// nobody the game was counted against.
const oldAbortLua = `
local done = redis.call('GET', KEYS[2])
if done then
  if ARGV[7] ~= '' and done == ARGV[7] then
    return 1
  end
  return 0
end
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('SET', KEYS[2], ARGV[7], 'EX', ARGV[2])
local at, window, now = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - window)
if at > now - window then
  redis.call('ZADD', KEYS[3], at, ARGV[3])
  redis.call('PEXPIRE', KEYS[3], window)
end
return 1`

// TestAnAbortCountedByThePreviousReleaseIsTakenBack: in a rolling
// upgrade, a rating consumer of the previous release counts the abort
// without a first move of a game made for a match that a replica of this
// one then gives up (undoGame -> Unrate). That release names nobody the
// abort was counted against, and Unrate took nothing back: the player,
// never told of the game, kept the abort, within the window that keeps
// them out of the rated queue. The player is the one whose log of recent
// aborts holds the game.
func TestAnAbortCountedByThePreviousReleaseIsTakenBack(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	kind := commonv1.GameKind_GAME_KIND_JANGGI
	base := prefix + "mm:{r:janggi}:"
	game, p1, p2 := "g-old-abort", "p1", "p2"
	now := time.Now()
	keys := []string{base + "aborts", base + "done:" + game, base + "recentaborts:" + p1}
	n, err := redis.NewScript(oldAbortLua).Run(ctx, rdb, keys, p1, int64(90*24*3600), game,
		now.UnixMilli(), store.AbortWindow.Milliseconds(), now.UnixMilli(), "old-consumer").Int()
	if err != nil || n != 1 {
		t.Fatalf("old abort.lua = %d, %v", n, err)
	}
	if _, recent, err := st.AbortWait(ctx, kind, p1, 1, time.Now()); err != nil || recent != 1 {
		t.Fatalf("before the give-up: %d recent aborts, %v; the test proves nothing", recent, err)
	}

	if err := st.Unrate(ctx, kind, game, p1, p2); err != nil {
		t.Fatal(err)
	}
	r, err := st.PlayerRating(ctx, kind, p1)
	if err != nil {
		t.Fatal(err)
	}
	_, recent, err := st.AbortWait(ctx, kind, p1, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if r.Aborts != 0 || recent != 0 {
		t.Errorf("%s, never told of the game, after the give-up: %d aborts, %d in the rated queue's window; want none",
			p1, r.Aborts, recent)
	}
}
