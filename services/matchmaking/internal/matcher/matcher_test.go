package matcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/redisx"
	"github.com/palacehq/palace/services/game/gametest"
	"github.com/palacehq/palace/services/matchmaking/internal/games"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// TestStalledMatchIsCompleted: a replica pairs two tickets and dies before
// creating their game. Another replica takes the match over after
// StallAfter and creates the game; completing it again (a late retry of
// the first replica) finds the same game and changes nothing.
func TestStalledMatchIsCompleted(t *testing.T) {
	env := gametest.Start(t, nil)
	st := store.New(redistest.Client(t), redistest.Prefix(t))
	ctx := context.Background()
	pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Control: clock.Default()}
	// The "crashed" replica's pass: paired, never completed.
	mt := pairTwo(t, st, pool)

	m, err := New(Config{Interval: 20 * time.Millisecond, StallAfter: 300 * time.Millisecond, Keep: time.Hour, IdleAfter: time.Hour},
		slog.New(slog.NewTextHandler(io.Discard, nil)), st, games.New(env.Client, st, time.Hour, nil), noop.NewMeterProvider().Meter("t"))
	if err != nil {
		t.Fatal(err)
	}
	run(t, m)
	a, b := waitState(t, st, pool, mt, store.StateMatched, "stalled match never completed")
	if a.Game == "" || a.Game != b.Game || a.Side == b.Side || a.Opponent != b.Player {
		t.Fatalf("tickets %+v %+v", a, b)
	}
	// A late retry of the dead replica: same game, nothing changes.
	if err := m.Complete(ctx, pool, mt); err != nil {
		t.Fatal(err)
	}
	a2, _, _ := st.Tickets(ctx, pool, mt)
	if a2.Game != a.Game || a2.Token != a.Token {
		t.Fatalf("retry changed the ticket: %+v -> %+v", a, a2)
	}
}

// TestMatchWithoutAGameIsGivenUp: while the game service is away, a
// paired match cannot get its game. Its players are held neither paired
// nor out of the pool for ever: after GiveUpAfter the match is given up,
// both tickets expire, and the players may enter again. A game made late
// for it is recorded on no ticket, and listed for neither player.
func TestMatchWithoutAGameIsGivenUp(t *testing.T) {
	for _, rated := range []bool{false, true} {
		t.Run(fmt.Sprintf("rated %v", rated), func(t *testing.T) {
			env := gametest.Start(t, nil)
			rdb, prefix := redistest.Client(t), redistest.Prefix(t)
			st := store.New(rdb, prefix)
			ctx := context.Background()
			pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Control: clock.Default(), Rated: rated}
			mt := pairTwo(t, st, pool)
			enter := func(p, rid string) (string, store.EnterOutcome) {
				t.Helper()
				return enterPool(t, st, pool, p, rid)
			}
			// Paired, a player cannot enter the pool again: a second game of it
			// would be made for them once the game service is back.
			if id, out := enter("p1", "r2"); out != store.Busy || id != mt.A && id != mt.B {
				t.Fatalf("entering again while paired: %v %v, want Busy with the paired ticket", id, out)
			}

			away, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer away.Close()
			m, err := New(Config{Interval: 20 * time.Millisecond, StallAfter: 100 * time.Millisecond, GiveUpAfter: 500 * time.Millisecond, Keep: time.Hour, IdleAfter: time.Hour},
				slog.New(slog.NewTextHandler(io.Discard, nil)), st, games.New(gamev1.NewGameServiceClient(away), st, time.Hour, nil), noop.NewMeterProvider().Meter("t"))
			if err != nil {
				t.Fatal(err)
			}
			run(t, m)
			waitState(t, st, pool, mt, store.StateExpired, "the match was not given up")
			if _, out := enter("p1", "r3"); out != store.Entered {
				t.Fatalf("entering again after the match was given up: %v", out)
			}
			// The game service is back, and a late creation completes: the match
			// stays given up.
			late, err := New(Config{Interval: time.Hour, StallAfter: time.Hour, Keep: time.Hour, IdleAfter: time.Hour},
				slog.New(slog.NewTextHandler(io.Discard, nil)), st, games.New(env.Client, st, time.Hour, nil), noop.NewMeterProvider().Meter("t"))
			if err != nil {
				t.Fatal(err)
			}
			if err := late.Complete(ctx, pool, mt); err != nil {
				t.Fatal(err)
			}
			if a, b, _ := st.Tickets(ctx, pool, mt); a.State != store.StateExpired || b.State != store.StateExpired || a.Game != "" {
				t.Fatalf("a late game changed the given-up tickets: %+v %+v", a, b)
			}
			// Nor is it in either player's list of games.
			for _, p := range []string{"p1", "p2"} {
				if listed, err := st.PlayerGames(ctx, p, time.Time{}, store.MaxPlayerGames); err != nil || len(listed) != 0 {
					t.Fatalf("%s's games after the late game: %+v, %v; want none", p, listed, err)
				}
			}
			// Nor is it rated (its abort, once no first move comes, counted
			// against a player who never knew of it), nor kept for a rematch.
			if ps, err := st.ClaimPending(ctx, time.Now(), time.Now().Add(time.Minute), 10); err != nil || len(ps) != 0 {
				t.Fatalf("pending rated games after the late game: %+v, %v; want none", ps, err)
			}
			if kept, err := rdb.Keys(ctx, prefix+"mm:{gm:*").Result(); err != nil || len(kept) != 0 {
				t.Fatalf("game records after the late game: %v, %v; want none", kept, err)
			}
		})
	}
}

// enterPool enters player p's ticket into pool with request id rid.
func enterPool(t *testing.T, st *store.Store, pool store.Pool, p, rid string) (string, store.EnterOutcome) {
	t.Helper()
	now := time.Now()
	id, out, err := st.Enter(context.Background(), pool, store.Ticket{Player: p, Name: p, Rating: 1200, Entered: now, Expires: now.Add(time.Hour)}, rid, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	return id, out
}

// pairTwo enters p1 and p2 into pool and pairs them, as a pass does, and
// returns their match, whose game nobody makes yet.
func pairTwo(t *testing.T, st *store.Store, pool store.Pool) store.Match {
	t.Helper()
	enterPool(t, st, pool, "p1", "r1")
	enterPool(t, st, pool, "p2", "r1")
	res := st.Pair(context.Background(), []store.Pool{pool}, store.PairParams{Now: time.Now(), BaseWindow: 100, MaxPairs: 10, Keep: time.Hour})
	if len(res) != 1 || res[0].Err != nil || len(res[0].Matches) != 1 {
		t.Fatalf("pair: %+v", res)
	}
	return res[0].Matches[0]
}

// run runs m until the test ends.
func run(t *testing.T, m *Matcher) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitState waits up to 10 s for both tickets of mt to be in state.
func waitState(t *testing.T, st *store.Store, pool store.Pool, mt store.Match, state, failure string) (store.Ticket, store.Ticket) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, b, err := st.Tickets(context.Background(), pool, mt)
		if err != nil {
			t.Fatal(err)
		}
		if a.State == state && b.State == state {
			return a, b
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %+v %+v", failure, a, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestARecordedMatchIsNotGivenUp: a match's game was recorded on its
// tickets, but the record waits for a replica that was held back, so the
// match is still among those being created, now past GiveUpAfter. It is
// not given up: it is completed again, which confirms and announces it.
func TestARecordedMatchIsNotGivenUp(t *testing.T) {
	env := gametest.Start(t, nil)
	ctx := context.Background()
	pair := redistest.NewPair(t)
	st := store.New(pair.Master.Client(t), redistest.Prefix(t))
	st.Replication = redisx.Replication{Replicas: 1, Timeout: 200 * time.Millisecond}
	pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Control: clock.Default()}
	mt := pairTwo(t, st, pool)
	full, _, _, err := st.MatchTickets(ctx, pool, mt.ID)
	if err != nil {
		t.Fatal(err)
	}
	grant := store.Grant{Side: "first", Token: "t", Expires: time.Now().Add(time.Hour)}
	pair.Link.Blackhole()
	if _, err := st.Finish(ctx, pool, full, "g1", grant, grant, time.Now(), time.Hour, nil, 0); !errors.Is(err, redisx.ErrNotReplicated) {
		t.Fatalf("finish with the replica held back: %v", err)
	}
	pair.Link.Restore()
	m, err := New(Config{Interval: 20 * time.Millisecond, StallAfter: 50 * time.Millisecond, GiveUpAfter: 100 * time.Millisecond, Keep: time.Hour, IdleAfter: time.Hour},
		slog.New(slog.NewTextHandler(io.Discard, nil)), st, games.New(env.Client, st, time.Hour, nil), noop.NewMeterProvider().Meter("t"))
	if err != nil {
		t.Fatal(err)
	}
	m.Touch(pool)
	time.Sleep(200 * time.Millisecond) // past GiveUpAfter
	run(t, m)
	waitNoneCreating(ctx, t, st, pool)
	if a, b, err := st.Tickets(ctx, pool, mt); err != nil || a.State != store.StateMatched || b.State != store.StateMatched || a.Game != "g1" {
		t.Fatalf("tickets %+v %+v (%v): want both matched to g1", a, b, err)
	}
}

// TestAQueueGameCarriesWhenItsNamesWereGiven proves that the time each
// player was given their name (their credential's sign-in) goes from the
// ticket to the rated game's pending record and to its record for
// rematches, so that its rating shows the name only when no newer one is
// shown (store.Player.NamedAt).
func TestAQueueGameCarriesWhenItsNamesWereGiven(t *testing.T) {
	env := gametest.Start(t, nil)
	st := store.New(redistest.Client(t), redistest.Prefix(t))
	ctx := context.Background()
	pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Control: clock.Default(), Rated: true}
	named := map[string]time.Time{"p1": time.UnixMilli(1_700_000_000_000), "p2": time.UnixMilli(1_700_000_123_000)}
	now := time.Now()
	for p, at := range named {
		if _, _, err := st.Enter(ctx, pool, store.Ticket{Player: p, Name: p, NamedAt: at, Rating: 1200, Entered: now, Expires: now.Add(time.Hour)}, "r1", time.Hour, nil); err != nil {
			t.Fatal(err)
		}
	}
	res := st.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: time.Now(), BaseWindow: 100, MaxPairs: 10, Keep: time.Hour})
	if len(res) != 1 || res[0].Err != nil || len(res[0].Matches) != 1 {
		t.Fatalf("pair: %+v", res)
	}
	m, err := New(Config{Keep: time.Hour}, slog.New(slog.NewTextHandler(io.Discard, nil)), st, games.New(env.Client, st, time.Hour, nil), noop.NewMeterProvider().Meter("t"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Complete(ctx, pool, res[0].Matches[0]); err != nil {
		t.Fatal(err)
	}
	pending, err := st.ClaimPending(ctx, time.Now(), time.Now().Add(time.Minute), 10)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending: %+v (%v), want the game", pending, err)
	}
	first, second := pending[0].Players()
	g, err := st.LoadGame(ctx, pending[0].Game)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []store.Player{first, second, g.First, g.Second} {
		if !p.NamedAt.Equal(named[p.ID]) {
			t.Errorf("%s's name given at %v in the game's records, want %v", p.ID, p.NamedAt, named[p.ID])
		}
	}
}
