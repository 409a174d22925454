package ratings

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game/gametest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// giveUpAfterPendingRead runs giveUp once, right after the first read of
// the pending set (ZSCORE on mm:{pending}:z) has been answered: a matcher
// giving the match up lands between Settle's IsPending and what Settle
// does next.
type giveUpAfterPendingRead struct {
	fired  atomic.Bool
	giveUp func()
}

func (h *giveUpAfterPendingRead) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *giveUpAfterPendingRead) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if strings.EqualFold(cmd.Name(), "zscore") && len(cmd.Args()) > 1 {
			if key, _ := cmd.Args()[1].(string); strings.HasSuffix(key, "mm:{pending}:z") && h.fired.CompareAndSwap(false, true) {
				h.giveUp()
			}
		}
		return err
	}
}
func (h *giveUpAfterPendingRead) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAGameGivenUpWhileItsAbortSettlesCountsNothing: a game made for a
// match that is given up, whose players were never told of it, counts for
// nobody. Settle's check that the game is pending and its count of the
// abort are two steps; a give-up on another replica between them used to
// leave the abort counted against a player who never learnt of the game,
// and kept for the rated queue's abort bound. The give-up unrates the game
// before it leaves pending, in the slot of the count.
func TestAGameGivenUpWhileItsAbortSettlesCountsNothing(t *testing.T) {
	prefix := redistest.Prefix(t)
	plain := store.New(redistest.Client(t), prefix)
	rdb := redistest.Client(t)
	var p store.Pending
	hook := &giveUpAfterPendingRead{giveUp: func() {
		// The matcher's undoGame, on another replica, in its order.
		ctx := context.Background()
		if err := plain.Unrate(ctx, commonv1.GameKind(p.Kind), p.Game, p.First, p.Second); err != nil {
			t.Errorf("Unrate: %v", err)
		}
		if err := plain.ForgetGame(ctx, p.Game); err != nil {
			t.Errorf("ForgetGame: %v", err)
		}
	}}
	rdb.AddHook(hook)
	f := &fixture{env: gametest.Start(t, nil), store: store.New(rdb, prefix)}
	c := f.consumer(t, Config{})
	p, _ = f.ratedGame(t, "kim", "lee", true)

	// Nobody was told of the game: nobody moved, and it aborted without a
	// first move, which names Cho/Red.
	res := &commonv1.Result{Method: commonv1.EndMethod_END_METHOD_ABORTED}
	if err := c.Settle(context.Background(), p, res, commonv1.Side_SIDE_FIRST, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if !hook.fired.Load() {
		t.Fatal("the give-up never ran")
	}
	if f.pending(t, p.Game) {
		t.Fatal("the game given up is pending again")
	}
	kim := f.rating(t, "kim")
	_, recent, err := f.store.AbortWait(context.Background(), commonv1.GameKind_GAME_KIND_XIANGQI, "kim", 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if kim.Aborts != 0 || recent != 0 {
		t.Fatalf("kim, never told of a game given up while its abort was settled: %d aborts, %d in the rated queue's window; want none counted", kim.Aborts, recent)
	}
}
