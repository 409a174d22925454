package matcher

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
// those being created, once no try at completing it can still write.
func TestGivingUpAMatchUndoesTheGameACrashedReplicaMade(t *testing.T) {
	c := crashAfterPending(t)
	ctx := context.Background()
	c.giveUp(t)
	wantUndone(ctx, t, c.st, c.game)
	if _, err := c.st.LoadGame(ctx, c.game); err == nil {
		t.Errorf("game %s of a match given up is still recorded for rematches", c.game)
	}
}

// crashed is a rated match whose game a replica made, listed and recorded
// as pending, and which was killed before it recorded the game on the
// tickets.
type crashed struct {
	env  *gametest.Env
	st   *store.Store
	pool store.Pool
	mt   store.Match
	cfg  Config
	game string
}

func crashAfterPending(t *testing.T) *crashed {
	t.Helper()
	c := &crashed{env: gametest.Start(t, nil)}
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	c.st = store.New(rdb, prefix)
	c.pool = store.Pool{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Control: clock.Default(), Rated: true}
	c.mt = pairTwo(t, c.st, c.pool)
	c.cfg = Config{Interval: 20 * time.Millisecond, StallAfter: 50 * time.Millisecond, GiveUpAfter: 300 * time.Millisecond, Keep: time.Hour, IdleAfter: time.Hour,
		CreateTimeout: 2 * time.Second, LateWrites: 200 * time.Millisecond}

	dying := redistest.Client(t)
	dying.AddHook(&redistest.KilledAfterWriting{Key: prefix + "mm:{pending}:z"})
	dst := store.New(dying, prefix)
	m, err := New(c.cfg, discardLogs(), dst, games.New(c.env.Client, dst, time.Hour, nil), noop.NewMeterProvider().Meter("t"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Complete(context.Background(), c.pool, c.mt); err == nil {
		t.Fatal("the match was completed by the replica killed before recording its game")
	}
	c.game = listedGame(t, c.st, "p1")
	return c
}

// giveUp starts a replica after GiveUpAfter (a restart's back-off, a
// rollout) and waits for it to give the match up and leave it.
func (c *crashed) giveUp(t *testing.T) {
	t.Helper()
	time.Sleep(c.cfg.GiveUpAfter + 100*time.Millisecond)
	m, err := New(c.cfg, discardLogs(), c.st, games.New(c.env.Client, c.st, time.Hour, nil), noop.NewMeterProvider().Meter("t"))
	if err != nil {
		t.Fatal(err)
	}
	run(t, m)
	waitState(t, c.st, c.pool, c.mt, store.StateExpired, "the match was not given up")
	waitNoneCreating(context.Background(), t, c.st, c.pool)
}

func discardLogs() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// listedGame returns the one game in player's list of games.
func listedGame(t *testing.T, st *store.Store, player string) string {
	t.Helper()
	listed, err := st.PlayerGames(context.Background(), player, time.Time{}, store.MaxPlayerGames)
	if err != nil || len(listed) != 1 {
		t.Fatalf("%s lists %+v (%v), want one game", player, listed, err)
	}
	return listed[0].Game
}

// TestAGameListedAfterItsMatchWasGivenUpIsUndone proves that a replica
// that noted a match's game and stalled before listing it cannot leave the
// game listed and pending once another replica gave the match up: the
// match stays among those being created, its game undone at every look,
// until no try that noted the game before the give-up can still write
// (CreateTimeout and LateWrites). Replica A makes the game of a rated
// match and notes it on the match (MarkMade), then stalls. Replica B gives
// the match up. A wakes, lists the game for both players and records it
// as pending, and is killed before Finish, which would have found the
// match void and undone the game itself. B's next look undoes it: neither
// player lists a game they were never told of (ResumeGame would seat them
// in it), nor has its abort without a first move counted against them.
func TestAGameListedAfterItsMatchWasGivenUpIsUndone(t *testing.T) {
	env := gametest.Start(t, nil)
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Control: clock.Default(), Rated: true}
	mt := pairTwo(t, st, pool)
	// A's try outlives B's first look (a second), so that it writes after
	// the give-up.
	cfg := Config{Interval: 20 * time.Millisecond, StallAfter: 50 * time.Millisecond, GiveUpAfter: 100 * time.Millisecond, Keep: time.Hour, IdleAfter: time.Hour,
		CreateTimeout: 3 * time.Second, LateWrites: 200 * time.Millisecond}
	logs := slog.New(slog.NewTextHandler(io.Discard, nil))
	time.Sleep(150 * time.Millisecond) // past GiveUpAfter: B's first look gives the match up

	// Replica B, started while A stalls after noting the game.
	gaveUp := func() {
		m, err := New(cfg, logs, st, games.New(env.Client, st, time.Hour, nil), noop.NewMeterProvider().Meter("t"))
		if err != nil {
			t.Error(err)
			return
		}
		run(t, m)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			a, b, err := st.Tickets(ctx, pool, mt)
			if err == nil && a.State == store.StateExpired && b.State == store.StateExpired {
				return
			}
		}
		t.Error("B did not give the match up")
	}

	// Replica A: stalls after MarkMade, killed once the game is pending.
	dying := redistest.Client(t)
	dying.AddHook(&pauseAfterWriting{key: prefix + "mm:{p:" + pool.Tag() + "}:m:" + mt.ID, pause: gaveUp})
	dying.AddHook(&redistest.KilledAfterWriting{Key: prefix + "mm:{pending}:z"})
	dst := store.New(dying, prefix)
	a, err := New(cfg, logs, dst, games.New(env.Client, dst, time.Hour, nil), noop.NewMeterProvider().Meter("t"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Complete(ctx, pool, mt); err == nil {
		t.Fatal("A completed the match it was killed in")
	}
	if t.Failed() {
		return
	}
	made, err := rdb.HGet(ctx, prefix+"mm:{p:"+pool.Tag()+"}:m:"+mt.ID, "made").Result()
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := st.IsPending(ctx, made); err != nil || !ok {
		t.Fatalf("A did not record game %s as pending after the give-up (%v): the test proves nothing", made, err)
	}
	if n, err := st.Count(ctx, []store.Pool{pool}); err != nil || n[0].Creating != 1 {
		t.Fatalf("pool counts %+v (%v) while A's try may still write: the match given up should still be among those being created", n, err)
	}

	waitNoneCreating(ctx, t, st, pool)
	wantUndone(ctx, t, st, made)
}

// waitNoneCreating waits up to 10 s for pool to have no match being
// created: given up, or its game recorded.
func waitNoneCreating(ctx context.Context, t *testing.T, st *store.Store, pool store.Pool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n, err := st.Count(ctx, []store.Pool{pool})
		if err != nil {
			t.Fatal(err)
		}
		if n[0].Creating == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %s still has a match being created 10 s later", pool.ID())
		}
	}
}

// wantUndone wants game g, made for a match of p1 and p2 that was given
// up, in neither player's list and pending no rating: its abort without a
// first move would count against a player never told of it.
func wantUndone(ctx context.Context, t *testing.T, st *store.Store, g string) {
	t.Helper()
	for _, p := range []string{"p1", "p2"} {
		if listed, err := st.PlayerGames(ctx, p, time.Time{}, store.MaxPlayerGames); err != nil || len(listed) != 0 {
			t.Errorf("%s lists %+v (%v) after the match was given up; want nothing", p, listed, err)
		}
	}
	if ok, err := st.IsPending(ctx, g); err != nil || ok {
		t.Errorf("game %s of a match given up is still pending a rating (%v)", g, err)
	}
}

// pauseAfterWriting runs pause once, right after the first successful
// command that names key (the replica stalls there: a GC pause, a slow network).
type pauseAfterWriting struct {
	key   string
	pause func()
	once  sync.Once
}

func (p *pauseAfterWriting) DialHook(next redis.DialHook) redis.DialHook { return next }

func (p *pauseAfterWriting) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		for _, a := range cmd.Args()[1:] {
			if a == p.key && cmd.Name() != "get" && err == nil {
				p.once.Do(p.pause)
				break
			}
		}
		return err
	}
}

func (p *pauseAfterWriting) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
