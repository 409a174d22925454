package game_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/game/gametest"
)

// TestPlayersAbortBeforeTheGameBegins: in a game created to allow it,
// either seat ends the game without a result while it has not begun:
// during the Janggi setup, or before both first moves, whoever moved. The
// ending names who aborted, a retry gets the first answer, and the event
// stream ends with it.
func TestPlayersAbortBeforeTheGameBegins(t *testing.T) {
	env := gametest.Start(t, nil)
	minute := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(time.Minute)}}}
	abortable := func(kind commonv1.GameKind, tc *commonv1.TimeControl) *table {
		tb := create(t, env, &gamev1.CreateGameRequest{Kind: kind, TimeControl: tc, PlayersMayAbort: true})
		if !tb.get(t).GetPlayersMayAbort() {
			t.Fatal("a game created with players_may_abort does not show it")
		}
		return tb
	}
	abort := func(tb *table, side commonv1.Side) {
		t.Helper()
		before := tb.get(t).GetVersion()
		req := &gamev1.AbortRequest{GameId: tb.id, RequestId: rid()}
		resp, err := env.Client.Abort(tb.as(side), req)
		if err != nil {
			t.Fatalf("%v's abort: %v", side, err)
		}
		g := resp.GetGame()
		if r := g.GetResult(); g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ABORTED || r.GetMethod() != commonv1.EndMethod_END_METHOD_ABORTED ||
			r.GetWinner() != commonv1.Winner_WINNER_UNSPECIFIED || g.GetEndedBy() != side || tb.get(t).GetEndedBy() != side {
			t.Fatalf("after %v's abort: %v, result %v, ended by %v; want aborted by it, no winner", side, g.GetStatus(), r, g.GetEndedBy())
		}
		again, err := env.Client.Abort(tb.as(side), req)
		if err != nil || !proto.Equal(again, resp) {
			t.Fatalf("the abort sent again: %v, %v; want the first answer", again, err)
		}
		evs := eventsAfter(t, tb, before)
		if end := evs[len(evs)-1].GetGameEnded(); end.GetResult().GetMethod() != commonv1.EndMethod_END_METHOD_ABORTED || end.GetSide() != side {
			t.Fatalf("events after the abort: %v; want the game ended, aborted by %v", evs, side)
		}
	}

	// Han, choosing its formation.
	abort(abortable(commonv1.GameKind_GAME_KIND_JANGGI, minute), commonv1.Side_SIDE_SECOND)
	// Black, before its first move.
	x := abortable(commonv1.GameKind_GAME_KIND_XIANGQI, minute)
	x.move(t, "h3e3")
	abort(x, commonv1.Side_SIDE_SECOND)
	// Red, who has moved, while Black has not: a game without a clock.
	u := abortable(commonv1.GameKind_GAME_KIND_XIANGQI, nil)
	u.move(t, "h3e3")
	abort(u, commonv1.Side_SIDE_FIRST)
}

// TestAGameIsTheSameWhetherItsPlayersMayAbort: a creation first sent
// without players_may_abort and sent again with it (by a matchmaking
// replica upgraded in between) finds the first game, not a second one.
func TestAGameIsTheSameWhetherItsPlayersMayAbort(t *testing.T) {
	env := gametest.Start(t, nil)
	first := &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Rated: true, Seats: seats()}
	a, err := env.Client.CreateGame(context.Background(), first)
	if err != nil {
		t.Fatal(err)
	}
	again := proto.CloneOf(first)
	again.PlayersMayAbort = true
	b, err := env.Client.CreateGame(context.Background(), again)
	if err != nil {
		t.Fatal(err)
	}
	if a.GetGameId() != b.GetGameId() || b.GetGame().GetPlayersMayAbort() {
		t.Fatalf("the creation sent again with players_may_abort made game %s (aborts %v), want the first, %s, as created",
			b.GetGameId(), b.GetGame().GetPlayersMayAbort(), a.GetGameId())
	}
}

// TestAnAbortMeetsAPassedDeadlineFirst: of Abort, the proto says
// "Deadlines that passed come first, as for Resign": a first-move deadline
// that passed unannounced is committed (the game aborted for want of that
// first move) and the call refused. In a game created without
// players_may_abort (a tournament's), Abort used to be refused with
// "resign to leave it" and the deadline left uncommitted, sending the
// player to resign a game already over.
func TestAnAbortMeetsAPassedDeadlineFirst(t *testing.T) {
	env := gametest.Start(t, nil)
	red, black := commonv1.Side_SIDE_FIRST, commonv1.Side_SIDE_SECOND
	tc := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(10 * time.Minute)}}}
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: tc, FirstMoveTime: durationpb.New(time.Second)})
	time.Sleep(1300 * time.Millisecond)
	_, err := env.Client.Abort(tb.as(black), &gamev1.AbortRequest{GameId: tb.id, RequestId: rid()})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("abort after Red's first-move deadline: %v, want FailedPrecondition", err)
	}
	g := tb.get(t)
	if g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ABORTED || g.GetEndedBy() != red {
		t.Fatalf("after an Abort that came after Red's first-move deadline: status %v, ended by %v (refusal %q); want the deadline committed first (ABORTED for want of Red's first move), as Resign does",
			g.GetStatus(), g.GetEndedBy(), status.Convert(err).Message())
	}
}
