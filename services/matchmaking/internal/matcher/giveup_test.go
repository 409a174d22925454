package matcher

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game/gametest"
	"github.com/palacehq/palace/services/matchmaking/internal/games"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// TestGivingUpAMatchUndoesTheGameACrashedReplicaMade: the replica that
// paired two tickets of a rated pool creates their game, lists it for both
// players and records it as pending, and is killed before it records the
// game on the tickets. A replica comes back only after GiveUpAfter (a
// restart's back-off, a rollout) and gives the match up: both tickets
// expire, and nobody is told of the game. The game leaves both players'
// lists of games (from which ResumeGame would seat them in it), is no
// longer pending (its abort without a first move would count against a
// player who never knew of it), nor recorded for rematches, as a game made
// late for a match given up is not; and only then does the match leave
// those being created.
func TestGivingUpAMatchUndoesTheGameACrashedReplicaMade(t *testing.T) {
	env := gametest.Start(t, nil)
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Control: clock.Default(), Rated: true}
	mt := pairTwo(t, st, pool)
	const giveUp = 300 * time.Millisecond
	cfg := Config{Interval: 20 * time.Millisecond, StallAfter: 50 * time.Millisecond, GiveUpAfter: giveUp, Keep: time.Hour, IdleAfter: time.Hour}
	logs := slog.New(slog.NewTextHandler(io.Discard, nil))

	// The pairing replica, killed once the game is pending.
	dying := redistest.Client(t)
	dying.AddHook(&redistest.KilledAfterWriting{Key: prefix + "mm:{pending}:z"})
	dst := store.New(dying, prefix)
	crashed, err := New(cfg, logs, dst, games.New(env.Client, dst, time.Hour, nil), noop.NewMeterProvider().Meter("t"))
	if err != nil {
		t.Fatal(err)
	}
	if err := crashed.Complete(ctx, pool, mt); err == nil {
		t.Fatal("the match was completed by the replica killed before recording its game")
	}
	g := listedGame(t, st, "p1")

	time.Sleep(giveUp + 100*time.Millisecond)
	gc := games.New(env.Client, st, time.Hour, nil)
	m, err := New(cfg, logs, st, gc, noop.NewMeterProvider().Meter("t"))
	if err != nil {
		t.Fatal(err)
	}
	run(t, m)
	waitState(t, st, pool, mt, store.StateExpired, "the match was not given up")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n, err := st.Count(ctx, []store.Pool{pool})
		if err != nil {
			t.Fatal(err)
		}
		if n[0].Creating == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the match given up is still being created 10 s later")
		}
	}

	for _, p := range []string{"p1", "p2"} {
		if listed, err := st.PlayerGames(ctx, p, time.Time{}, store.MaxPlayerGames); err != nil || len(listed) != 0 {
			t.Errorf("%s lists %+v (%v) after the match was given up; want nothing", p, listed, err)
		}
	}
	if ok, err := st.IsPending(ctx, g); err != nil || ok {
		t.Errorf("game %s of a match given up is still pending a rating (%v)", g, err)
	}
	if _, err := st.LoadGame(ctx, g); err == nil {
		t.Errorf("game %s of a match given up is still recorded for rematches", g)
	}
}

// listedGame returns the one game in player's list of games.
func listedGame(t *testing.T, st *store.Store, player string) string {
	t.Helper()
	listed, err := st.PlayerGames(context.Background(), player, time.Time{}, store.MaxPlayerGames)
	if err != nil || len(listed) != 1 {
		t.Fatalf("%s lists %+v (%v), want one game", player, listed, err)
	}
	return listed[0].Game
}
