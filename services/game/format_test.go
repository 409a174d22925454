package game_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/apierr"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/game/gametest"
	"github.com/palacehq/palace/services/game/internal/model"
	"github.com/palacehq/palace/services/game/internal/store"
)

// TestAGameOfANewerFormatIsLeftToNewerBuilds: during a rolling upgrade, a
// game that a newer build stored with a field this build does not know,
// marked as needing the newer format, is neither decided on nor written
// here: every command, a refusal or a deadline's expiry included, is
// Unavailable with reason NEWER_FORMAT, to be retried (on a newer
// replica), and nothing stored changes, the unknown field included. Reads
// still answer, with what this build reads of the game.
func TestAGameOfANewerFormatIsLeftToNewerBuilds(t *testing.T) {
	env := gametest.Start(t, nil)
	x := xiangqi(t, env)
	x.move(t, "h3e3")
	// What a newer build's commit leaves: a new stamp, its field, and the
	// format it needs.
	ctx := context.Background()
	editStored(t, env, x.id, func(st map[string]any) string {
		st["needs"], st["stamp"], st["future"] = model.Format+1, "newer", map[string]any{"kept": true}
		return "newer"
	})
	before := redisState(t, env, x.id)
	black := x.as(commonv1.Side_SIDE_SECOND)
	for name, call := range map[string]func() error{
		"a move": func() error {
			_, err := env.Client.MakeMove(black, &gamev1.MakeMoveRequest{GameId: x.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h10g8"}})
			return err
		},
		"a resignation": func() error {
			_, err := env.Client.Resign(black, &gamev1.ResignRequest{GameId: x.id, RequestId: rid()})
			return err
		},
		"a draw offer": func() error {
			_, err := env.Client.OfferDraw(black, &gamev1.OfferDrawRequest{GameId: x.id, RequestId: rid()})
			return err
		},
		// Refused here (the game was made without aborts), but the newer
		// build may have stored what allows it: nothing is decided on
		// what this build cannot read.
		"an abort": func() error {
			_, err := env.Client.Abort(black, &gamev1.AbortRequest{GameId: x.id, RequestId: rid()})
			return err
		},
		"a deadline": func() error {
			_, err := env.Client.ExpireDeadline(ctx, &gamev1.ExpireDeadlineRequest{GameId: x.id, DeadlineUnixMs: time.Now().UnixMilli()})
			return err
		},
	} {
		err := call()
		if status.Code(err) != codes.Unavailable || apierr.ReasonOf(err) != "NEWER_FORMAT" ||
			!strings.Contains(err.Error(), "last written by a newer version of the game service") {
			t.Fatalf("%s: %v, want Unavailable saying why", name, err)
		}
	}
	if after := redisState(t, env, x.id); after != before {
		t.Fatalf("the stored game changed:\n%s\n%s", before, after)
	}
	// The store refuses too, whoever asks it.
	games, err := store.New(env.Redis, store.Config{Prefix: env.Config.KeyPrefix})
	if err != nil {
		t.Fatal(err)
	}
	l, err := games.Load(ctx, x.id, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := games.Commit(ctx, l.State, model.Change{State: l.State}, "", nil, l.Now); !errors.Is(err, store.ErrNewerFormat) {
		t.Fatalf("store.Commit: %v, want ErrNewerFormat", err)
	}
	if after := redisState(t, env, x.id); after != before {
		t.Fatalf("the store changed the game:\n%s\n%s", before, after)
	}
	g, err := env.Client.GetGame(black, &gamev1.GetGameRequest{GameId: x.id})
	if err != nil || len(g.GetGame().GetMoves()) != 1 {
		t.Fatalf("GetGame: %v %v, want the game with its move", g, err)
	}
}
