package matcher

import (
	"context"
	"testing"
	"time"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/services/matchmaking/internal/games"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// TestAnAbortCountedBeforeTheGiveUpIsTakenBack: the replica that made a
// rated game is killed once the game is pending, before either player is
// told of it, and matchmaking comes back only after the game's first-move
// time: its rating consumer counts the abort without a first move against
// the first player before the stalled match is given up. The give-up used
// to leave that abort counted, against a player never told of the game,
// and in the window that keeps a player out of the rated queue; it is
// taken back, and a later delivery of the same ending counts nothing.
func TestAnAbortCountedBeforeTheGiveUpIsTakenBack(t *testing.T) {
	c := crashAfterPending(t)
	ctx := context.Background()
	kind, g := c.pool.Kind, c.game

	// The rating consumer settles the game's abort as it does (Settle ->
	// CountAbort), naming the first player.
	first := c.mt.PlayerA.ID
	if !games.FirstIsA(c.mt.ID, c.mt.A, c.mt.B) {
		first = c.mt.PlayerB.ID
	}
	now := time.Now()
	if counted, err := c.st.CountAbort(ctx, kind, g, first, "consumer-1", now, now); err != nil || !counted {
		t.Fatalf("CountAbort = %v, %v; the test proves nothing", counted, err)
	}

	c.giveUp(t)
	wantUndone(ctx, t, c.st, g)
	wantNoAbort(ctx, t, c.st, kind, first, "after the give-up")

	if counted, err := c.st.CountAbort(ctx, kind, g, first, "consumer-2", now, time.Now()); err != nil || counted {
		t.Errorf("the ending delivered again after the give-up: CountAbort = %v, %v; want nothing counted", counted, err)
	}
	if a, err := c.st.ApplyRating(ctx, store.Outcome{GameID: g, Kind: kind, A: store.Player{ID: "p1"}, B: store.Player{ID: "p2"}, ScoreA: 1, At: now, Applier: "consumer-2"}); err != nil || a.Done {
		t.Errorf("the game given up rated after all: %+v, %v", a, err)
	}
	wantNoAbort(ctx, t, c.st, kind, first, "after the ending came again")
}

// wantNoAbort wants player's count of aborts of kind, and their aborts in
// the rated queue's window, to be zero.
func wantNoAbort(ctx context.Context, t *testing.T, st *store.Store, kind commonv1.GameKind, player, when string) {
	t.Helper()
	r, err := st.PlayerRating(ctx, kind, player)
	if err != nil {
		t.Fatal(err)
	}
	_, recent, err := st.AbortWait(ctx, kind, player, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if r.Aborts != 0 || recent != 0 {
		t.Errorf("%s, never told of the game, %s: %d aborts, %d in the rated queue's window; want none", player, when, r.Aborts, recent)
	}
}
