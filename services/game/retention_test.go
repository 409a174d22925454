package game_test

import (
	"context"
	"io"
	"maps"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/app"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// gameKeys lists every key of a game (all under {g:<id>}) with its
// time to live.
func gameKeys(t *testing.T, env *gametest.Env, id string) map[string]time.Duration {
	t.Helper()
	ctx := context.Background()
	keys, err := env.Redis.Keys(ctx, env.Config.KeyPrefix+"{g:"+id+"}*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Duration{}
	for _, k := range keys {
		out[k] = env.Redis.PTTL(ctx, k).Val()
	}
	return out
}

// wantRetention checks that every key of the game lives the
// retention (give or take the test's own time), none without an expiry
// and none expiring before the others.
func wantRetention(t *testing.T, env *gametest.Env, id, when string) {
	t.Helper()
	ret := env.Config.Retention
	keys := gameKeys(t, env, id)
	if len(keys) < 2 {
		t.Fatalf("%s: keys of the game: %v, want at least its state and events", when, keys)
	}
	for k, d := range keys {
		if d <= ret-time.Minute || d > ret {
			t.Errorf("%s: %s expires in %v, want the retention %v", when, k, d, ret)
		}
	}
}

// TestEveryEndingLeavesEveryKeyTheRetention: on every path that ends
// a game, and after everything that may still touch a finished game (a
// retry, a spectator's read, a seat's stream opening and closing, a new
// credential, a stale deadline, a refused command), every key of the game
// lives the retention: none is left without an expiry, none keeps the
// (longer) live expiry, none expires before the others.
func TestEveryEndingLeavesEveryKeyTheRetention(t *testing.T) {
	env := gametest.Start(t, func(c *game.Config) { c.LiveTTL, c.Retention = 5*time.Hour, time.Hour })
	fischer1s := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(time.Second)}}}
	byoyomi := &commonv1.TimeControl{Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{MainTime: durationpb.New(5 * time.Minute), Periods: 3, PeriodTime: durationpb.New(30 * time.Second)}}}
	type ending struct {
		name   string
		create *gamev1.CreateGameRequest
		moves  []string
		// end ends the game; it returns a retry of the request that ended
		// it (nil when a deadline did), which must answer as it did.
		end func(t *testing.T, tb *table) func() (proto.Message, error)
	}
	resign := func(t *testing.T, tb *table) func() (proto.Message, error) {
		req := &gamev1.ResignRequest{GameId: tb.id, RequestId: rid()}
		do := func() (proto.Message, error) { return tb.env.Client.Resign(tb.as(commonv1.Side_SIDE_FIRST), req) }
		if _, err := do(); err != nil {
			t.Fatal(err)
		}
		return do
	}
	endings := []ending{
		{name: "checkmate", create: &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true, Start: &commonv1.Position{Fen: "4k4/R8/9/9/9/9/9/9/9/1R1K5 w - - 0 1"}},
			end: func(t *testing.T, tb *table) func() (proto.Message, error) {
				req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "b1b10"}}
				do := func() (proto.Message, error) { return tb.env.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), req) }
				if _, err := do(); err != nil {
					t.Fatal(err)
				}
				return do
			}},
		{name: "two passes", create: &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Public: true, Start: &commonv1.Position{Fen: rules.StartFEN(rules.Janggi)}},
			moves: []string{"e2e2"},
			end: func(t *testing.T, tb *table) func() (proto.Message, error) {
				req := &gamev1.PassRequest{GameId: tb.id, RequestId: rid()}
				do := func() (proto.Message, error) { return tb.env.Client.Pass(tb.as(commonv1.Side_SIDE_SECOND), req) }
				if _, err := do(); err != nil {
					t.Fatal(err)
				}
				return do
			}},
		{name: "resignation before any move", create: &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true}, end: resign},
		{name: "resignation after moves", create: &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true}, moves: []string{"h3e3", "h10g8"}, end: resign},
		{name: "abort", create: &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true, PlayersMayAbort: true},
			end: func(t *testing.T, tb *table) func() (proto.Message, error) {
				req := &gamev1.AbortRequest{GameId: tb.id, RequestId: rid()}
				do := func() (proto.Message, error) { return tb.env.Client.Abort(tb.as(commonv1.Side_SIDE_SECOND), req) }
				if _, err := do(); err != nil {
					t.Fatal(err)
				}
				return do
			}},
		{name: "draw agreement", create: &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true}, moves: []string{"h3e3"},
			end: func(t *testing.T, tb *table) func() (proto.Message, error) {
				if _, err := tb.env.Client.OfferDraw(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.OfferDrawRequest{GameId: tb.id, RequestId: rid()}); err != nil {
					t.Fatal(err)
				}
				req := &gamev1.AnswerDrawRequest{GameId: tb.id, RequestId: rid(), Accept: true}
				do := func() (proto.Message, error) { return tb.env.Client.AnswerDraw(tb.as(commonv1.Side_SIDE_SECOND), req) }
				if _, err := do(); err != nil {
					t.Fatal(err)
				}
				return do
			}},
		{name: "timeout by the sweeper", create: &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true, TimeControl: fischer1s}, moves: []string{"h3e3", "h10g8"},
			end: func(t *testing.T, tb *table) func() (proto.Message, error) {
				deadline := time.Now().Add(10 * time.Second)
				for tb.get(t).GetStatus() != commonv1.GameStatus_GAME_STATUS_ENDED {
					if time.Now().After(deadline) {
						t.Fatal("the game never ended on time")
					}
					time.Sleep(200 * time.Millisecond)
					sweep(t, tb.env)
				}
				return nil
			}},
		{name: "timeout found by a late command", create: &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true, TimeControl: fischer1s}, moves: []string{"h3e3", "h10g8"},
			end: func(t *testing.T, tb *table) func() (proto.Message, error) {
				time.Sleep(2500 * time.Millisecond)
				_, err := tb.env.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "b3b4"}})
				wantCode(t, err, codes.FailedPrecondition)
				return nil
			}},
		{name: "abort without a first move", create: &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true, TimeControl: byoyomi, FirstMoveTime: durationpb.New(time.Second)},
			end: func(t *testing.T, tb *table) func() (proto.Message, error) {
				time.Sleep(1200 * time.Millisecond)
				sweep(t, tb.env)
				return nil
			}},
	}
	for _, e := range endings {
		t.Run(e.name, func(t *testing.T) {
			tb := create(t, env, e.create)
			for _, m := range e.moves {
				tb.move(t, m)
			}
			retry := e.end(t, tb)
			g := tb.get(t)
			if g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ENDED && g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ABORTED {
				t.Fatalf("status %v after the ending", g.GetStatus())
			}
			wantRetention(t, env, tb.id, "at the end")
			before := gameKeys(t, env, tb.id)
			ctx := context.Background()

			// Everything that may still reach a finished game.
			if retry != nil {
				if _, err := retry(); err != nil {
					t.Fatalf("late retry: %v", err)
				}
			}
			if _, err := env.Client.GetGame(ctx, &gamev1.GetGameRequest{GameId: tb.id}); err != nil {
				t.Fatalf("spectator's read: %v", err)
			}
			for _, side := range []commonv1.Side{commonv1.Side_SIDE_FIRST, commonv1.Side_SIDE_SECOND, commonv1.Side_SIDE_UNSPECIFIED} {
				sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				if side != commonv1.Side_SIDE_UNSPECIFIED {
					sctx = gametest.As(sctx, tb.seats[side])
				}
				st, err := env.Client.StreamEvents(sctx, &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: true})
				if err != nil {
					cancel()
					t.Fatal(err)
				}
				for {
					if _, err := st.Recv(); err != nil {
						if err != io.EOF {
							t.Fatalf("stream of %v: %v", side, err)
						}
						break
					}
				}
				cancel()
			}
			if _, err := env.Client.IssueSeatCredentials(ctx, &gamev1.IssueSeatCredentialsRequest{GameId: tb.id, Side: commonv1.Side_SIDE_FIRST}); err != nil {
				t.Fatalf("IssueSeatCredentials: %v", err)
			}
			if _, err := env.Client.ExpireDeadline(ctx, &gamev1.ExpireDeadlineRequest{GameId: tb.id, DeadlineUnixMs: time.Now().UnixMilli()}); err != nil {
				t.Fatalf("ExpireDeadline: %v", err)
			}
			_, err := env.Client.Resign(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.ResignRequest{GameId: tb.id, RequestId: rid()})
			wantCode(t, err, codes.FailedPrecondition)
			time.Sleep(300 * time.Millisecond) // a seat's closing, held back for the presence grace

			wantRetention(t, env, tb.id, "after late actions")
			after := gameKeys(t, env, tb.id)
			bk, ak := slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after))
			if !slices.Equal(bk, ak) {
				t.Errorf("keys of the finished game changed: %v, then %v", bk, ak)
			}
			for k, d := range after {
				if d > before[k] {
					t.Errorf("%s: its expiry moved later after the end (%v, then %v): a finished game is kept the retention from its end", k, before[k], d)
				}
			}
		})
	}
}

// TestAFinishedGameExpiresOnTheInProcessRedis: `palace serve` without
// --redis-addr (what `make run` starts) keeps its games in an in-process
// Redis, where a finished game is gone once its retention has passed, as
// on a real Redis; otherwise no key of any game would ever expire, and
// the process would grow for as long as it runs.
func TestAFinishedGameExpiresOnTheInProcessRedis(t *testing.T) {
	env := gametest.StartServing(t, "", func(c *app.Config) { c.EmbeddedRedis = true },
		func(c *game.Config) { c.Retention = time.Second })
	tb := xiangqi(t, env)
	if _, err := env.Client.Resign(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.ResignRequest{GameId: tb.id, RequestId: rid()}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.GetGame(context.Background(), &gamev1.GetGameRequest{GameId: tb.id}); err != nil {
		t.Fatalf("the finished game within its retention: %v", err)
	}
	time.Sleep(2 * time.Second)
	_, err := env.Client.GetGame(context.Background(), &gamev1.GetGameRequest{GameId: tb.id})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("GetGame of a game finished 2s ago with a retention of 1s: %v, want NotFound (its keys never expire)", err)
	}
}
