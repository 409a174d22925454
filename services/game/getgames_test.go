package game_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/game/gametest"
)

// TestGetGames reads games of every status in one call: each as GetGame
// shows it, without its moves and legal moves, in the order asked, and
// the ids of games not kept apart.
func TestGetGames(t *testing.T) {
	env := gametest.Start(t, nil)
	ctx := context.Background()
	x := xiangqi(t, env)
	x.move(t, "h3e3")
	x.move(t, "h10g8")
	j := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_JANGGI})
	r := xiangqi(t, env)
	if _, err := env.Client.Resign(r.as(commonv1.Side_SIDE_SECOND), &gamev1.ResignRequest{GameId: r.id, RequestId: rid()}); err != nil {
		t.Fatal(err)
	}

	resp, err := env.Client.GetGames(ctx, &gamev1.GetGamesRequest{GameIds: []string{x.id, "no-such-game", j.id, x.id, r.id, "gone"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []*gamev1.Game{x.get(t), j.get(t), x.get(t), r.get(t)}
	for _, g := range want {
		g.Moves, g.LegalMoves = nil, nil
	}
	if got := resp.GetGames(); len(got) != len(want) {
		t.Fatalf("%d games, want %d: %v", len(got), len(want), got)
	}
	for i, g := range resp.GetGames() {
		if !proto.Equal(g, want[i]) {
			t.Errorf("game %d:\n got %v\nwant %v", i, g, want[i])
		}
	}
	if nf := resp.GetNotFound(); len(nf) != 2 || nf[0] != "no-such-game" || nf[1] != "gone" {
		t.Errorf("not found %v, want [no-such-game gone]", nf)
	}
	// The position is the one the moves made, though no move is sent.
	if got := resp.GetGames()[0]; got.GetPosition().GetFen() != "rnbakab1r/9/1c4nc1/p1p1p1p1p/9/9/P1P1P1P1P/1C2C4/9/RNBAKABNR w - - 2 2" || got.GetVersion() != 4 {
		t.Errorf("the game played: position %q at version %d", got.GetPosition().GetFen(), got.GetVersion())
	}
	if s := resp.GetGames()[1].GetStatus(); s != commonv1.GameStatus_GAME_STATUS_SETUP {
		t.Errorf("the Janggi game's status %v, want setup", s)
	}
	if res := resp.GetGames()[3].GetResult(); res.GetWinner() != commonv1.Winner_WINNER_FIRST || res.GetMethod() != commonv1.EndMethod_END_METHOD_RESIGNATION {
		t.Errorf("the resigned game's result %v", res)
	}

	// Only unknown games: none found, not an error.
	resp, err = env.Client.GetGames(ctx, &gamev1.GetGamesRequest{GameIds: []string{"nothing-here"}})
	if err != nil || len(resp.GetGames()) != 0 || len(resp.GetNotFound()) != 1 {
		t.Fatalf("GetGames of an unknown game: %v %v", resp, err)
	}
}

// TestGetGamesRefusals: a call without ids, with too many, or with a
// malformed one is refused whole, naming the problem, and reads nothing.
func TestGetGamesRefusals(t *testing.T) {
	env := gametest.Start(t, nil)
	ctx := context.Background()
	x := xiangqi(t, env)
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprintf("g%d", i)
	}
	keys := func() int { return len(env.Redis.Keys(ctx, env.Config.KeyPrefix+"*").Val()) }
	n, state := keys(), redisState(t, env, x.id)
	for _, c := range []struct {
		name string
		ids  []string
		msg  string
	}{
		{"no id", nil, "game_ids: at least one is required"},
		{"101 ids", many, "game_ids: 101 asked, at most 100 in one call"},
		{"an empty id", []string{x.id, ""}, "game_ids[1]: required"},
		{"a malformed id", []string{x.id, x.id, "a b"}, "game_ids[2]: contains ' ' (U+0020) at byte 1"},
		{"an over-long id", []string{strings.Repeat("g", 65)}, "game_ids[0]: longer than 64 bytes"},
	} {
		r, err := env.Client.GetGames(ctx, &gamev1.GetGamesRequest{GameIds: c.ids})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.msg) {
			t.Errorf("%s: %v %v, want InvalidArgument naming %q", c.name, r, err, c.msg)
		}
	}
	if keys() != n || redisState(t, env, x.id) != state {
		t.Fatal("refused calls changed Redis")
	}
	// A hundred is allowed.
	if r, err := env.Client.GetGames(ctx, &gamev1.GetGamesRequest{GameIds: many[:100]}); err != nil || len(r.GetNotFound()) != 100 {
		t.Fatalf("GetGames of 100 unknown games: %v %v", r, err)
	}
}
