package ratings

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game/gametest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// retryWhileRedisReturns retries a game command while the game service's Redis comes
// back.
func retryWhileRedisReturns(t *testing.T, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := fn()
		if err == nil {
			return
		}
		c := status.Code(err)
		if time.Now().After(deadline) || (c != codes.Unavailable && c != codes.Aborted && c != codes.Internal && c != codes.DeadlineExceeded) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lossyGame is a rated game whose game service keeps it in a Redis of its
// own that persists with snapshots only: a crash loses the writes since
// the last save.
type lossyGame struct {
	srv *redistest.Server
	env *gametest.Env
	f   *fixture
	p   store.Pending
	tok map[commonv1.Side]string
}

func newLossyGame(t *testing.T, first, second string) *lossyGame {
	t.Helper()
	srv := redistest.Own(t, "--appendonly", "no")
	env := gametest.StartOn(t, srv.Addr, nil)
	f := &fixture{env: env, store: store.New(redistest.Client(t), redistest.Prefix(t))}
	p, tok := f.ratedGame(t, first, second, true)
	return &lossyGame{srv: srv, env: env, f: f, p: p, tok: tok}
}

// play plays mv for side, through Redis' return, and returns the game's
// version after it.
func (g *lossyGame) play(ctx context.Context, t *testing.T, side commonv1.Side, mv string) uint64 {
	t.Helper()
	var v uint64
	retryWhileRedisReturns(t, "move "+mv, func() error {
		r, err := g.env.Client.MakeMove(gametest.As(ctx, g.tok[side]), &gamev1.MakeMoveRequest{GameId: g.p.Game, RequestId: rid(), Move: &commonv1.Move{Coordinate: mv}})
		v = r.GetGame().GetVersion()
		return err
	})
	return v
}

// resign resigns for side, through Redis' return, and returns the version
// the game ended at.
func (g *lossyGame) resign(ctx context.Context, t *testing.T, side commonv1.Side) uint64 {
	t.Helper()
	var v uint64
	retryWhileRedisReturns(t, "resign", func() error {
		r, err := g.env.Client.Resign(gametest.As(ctx, g.tok[side]), &gamev1.ResignRequest{GameId: g.p.Game, RequestId: rid()})
		v = r.GetGame().GetVersion()
		return err
	})
	return v
}

// TestARatedGameThatEndsBehindALostWriteIsRated: the game service's
// Redis persists with snapshots only and restarts without the last moves,
// which the rating consumer's stream had already passed. The game then
// ends (a resignation) at a version at or below the one the consumer had
// reached, so a stream resumed after that version is refused as ahead of
// the game (OutOfRange). The consumer reads the game's log anew from the
// start and rates the game, instead of retrying the refused resume for
// good while the game stays pending.
func TestARatedGameThatEndsBehindALostWriteIsRated(t *testing.T) {
	g := newLossyGame(t, "quin", "rory")
	srv, env, f, p := g.srv, g.env, g.f, g.p
	run(t, f.consumer(t, Config{ClaimEvery: 50 * time.Millisecond, RetryAfter: 20 * time.Millisecond}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g.play(ctx, t, commonv1.Side_SIDE_FIRST, "h3e3")
	g.play(ctx, t, commonv1.Side_SIDE_SECOND, "h10g8")
	time.Sleep(500 * time.Millisecond) // the consumer's stream has them
	// The snapshot Redis will restart from.
	if err := srv.Client(t).Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	g.play(ctx, t, commonv1.Side_SIDE_FIRST, "b1c3")
	lost := g.play(ctx, t, commonv1.Side_SIDE_SECOND, "b10c8")
	time.Sleep(700 * time.Millisecond) // the consumer's stream has reached them too
	if err := srv.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	ended := g.resign(ctx, t, commonv1.Side_SIDE_SECOND)
	t.Logf("the consumer had reached version %d; Redis lost it; the game ended at version %d", lost, ended)
	if ended > lost {
		t.Fatalf("the game ended at version %d, past the lost %d: Redis lost nothing", ended, lost)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.pending(t, p.Game) {
		if time.Now().After(deadline) {
			why := "?"
			if st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: p.Game, AfterVersion: lost}); err == nil {
				_, err = st.Recv()
				why = err.Error()
			}
			t.Fatalf("a stream after version %d answers: %s\nthe game ended 10 s ago (resigned at version %d) and is still pending: quin %+v, rory %+v; the consumer resumes after version %d, which the game no longer reaches", lost, why, ended, f.rating(t, "quin"), f.rating(t, "rory"), lost)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if q := f.rating(t, "quin"); q.Games != 1 || q.Rating != 1220 {
		t.Fatalf("quin after winning: %+v", q)
	}
}

// TestARatedGameThatEndsAtTheVersionItsStreamReachedIsRated: the
// consumer's stream reached version L (a move), then was cut (a renewal of
// the connection, a rollout); the game service's Redis restarts without
// that move, and the game ends (a resignation) at the same version L. The
// consumer resumes after version L: the game is not ahead of L, so only
// the commit it had at L tells the game service that its L is not the
// game's. Resumed by version alone, the stream of the ended game ended at
// once, over and over, and the game stayed pending, never rated, until it
// expired.
func TestARatedGameThatEndsAtTheVersionItsStreamReachedIsRated(t *testing.T) {
	g := newLossyGame(t, "sam", "tia")
	f, p := g.f, g.p
	c := f.consumer(t, Config{RetryAfter: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g.play(ctx, t, commonv1.Side_SIDE_FIRST, "h3e3")
	g.play(ctx, t, commonv1.Side_SIDE_SECOND, "h10g8")
	if err := g.srv.Client(t).Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	lost := g.play(ctx, t, commonv1.Side_SIDE_FIRST, "b1c3")

	// The consumer's stream reaches the move, then is cut (streams cut
	// every 300 ms, each resuming after the last, until one has it).
	var reached resumePoint
	for give := time.Now().Add(10 * time.Second); reached.version != lost && time.Now().Before(give); {
		fctx, fcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_ = c.follow(fctx, p, &reached)
		fcancel()
	}
	if reached.version != lost || reached.commit == "" {
		t.Fatalf("the stream reached %+v, want version %d and its commit", reached, lost)
	}

	if err := g.srv.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	ended := g.resign(ctx, t, commonv1.Side_SIDE_FIRST)
	if ended != lost {
		t.Fatalf("the game ended at version %d, want it at the lost version %d for this test", ended, lost)
	}

	// The consumer follows on after what it had reached.
	wctx, wcancel := context.WithTimeout(ctx, 8*time.Second)
	defer wcancel()
	c.watchFrom(wctx, p, reached)
	if f.pending(t, p.Game) {
		t.Fatalf("the game ended at version %d, which the consumer's stream had reached before Redis lost it, and is still pending 8 s later: sam %+v, tia %+v", ended, f.rating(t, "sam"), f.rating(t, "tia"))
	}
	if s := f.rating(t, "tia"); s.Games != 1 || s.Rating != 1220 {
		t.Fatalf("tia after winning: %+v", s)
	}
}
