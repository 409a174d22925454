package game_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/game/gametest"
)

// TestIssueSeatCredentials: a player who lost a credential gets a new one
// from a service that knows the player, and it acts for the seat as the
// first one did, also after the game ended, where it reads the private
// record. Issuing writes nothing.
func TestIssueSeatCredentials(t *testing.T) {
	env := gametest.Start(t, nil)
	ctx := context.Background()
	x := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI})
	before := redisState(t, env, x.id)

	r, err := env.Client.IssueSeatCredentials(ctx, &gamev1.IssueSeatCredentialsRequest{GameId: x.id, PlayerId: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetCredentials()) != 1 || r.GetCredentials()[0].GetSide() != commonv1.Side_SIDE_FIRST {
		t.Fatalf("credentials of p1: %v, want Red's alone", r.GetCredentials())
	}
	if r.GetGame().GetGameId() != x.id || r.GetGame().GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		t.Fatalf("game %v, want %s ongoing", r.GetGame(), x.id)
	}
	cred := r.GetCredentials()[0]
	if left := time.Until(cred.GetExpiresAt().AsTime()); left < env.Config.SeatTTL-time.Minute || left > env.Config.SeatTTL {
		t.Errorf("the new credential expires in %v, want --seat-ttl (%v)", left, env.Config.SeatTTL)
	}
	if n := cred.GetExpiresAt().GetNanos(); n != 0 {
		t.Errorf("expires_at has %d ns past the second at which the credential, which holds whole seconds, runs out", n)
	}
	if s := redisState(t, env, x.id); s != before {
		t.Fatalf("issuing changed the game:\n%s\nwas\n%s", s, before)
	}
	red := gametest.As(ctx, cred.GetToken())
	if _, err := env.Client.GetGame(red, &gamev1.GetGameRequest{GameId: x.id}); err != nil {
		t.Fatalf("the new credential cannot read the private game: %v", err)
	}
	if _, err := env.Client.MakeMove(red, &gamev1.MakeMoveRequest{GameId: x.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatalf("the new credential cannot move for Red: %v", err)
	}
	// It acts for Red only.
	_, err = env.Client.MakeMove(red, &gamev1.MakeMoveRequest{GameId: x.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h10g8"}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "Black's turn") {
		t.Fatalf("Red's new credential moved for Black: %v", err)
	}

	// By side, for an operator who knows no player ids.
	b, err := env.Client.IssueSeatCredentials(ctx, &gamev1.IssueSeatCredentialsRequest{GameId: x.id, Side: commonv1.Side_SIDE_SECOND})
	if err != nil || len(b.GetCredentials()) != 1 || b.GetCredentials()[0].GetSide() != commonv1.Side_SIDE_SECOND {
		t.Fatalf("Black's seat by side: %v %v", b, err)
	}
	black := gametest.As(ctx, b.GetCredentials()[0].GetToken())
	if _, err := env.Client.Resign(black, &gamev1.ResignRequest{GameId: x.id, RequestId: rid()}); err != nil {
		t.Fatalf("the new credential cannot resign for Black: %v", err)
	}

	// A finished game's record stays private, and a new credential reads it.
	r, err = env.Client.IssueSeatCredentials(ctx, &gamev1.IssueSeatCredentialsRequest{GameId: x.id, PlayerId: "p2"})
	if err != nil || r.GetGame().GetStatus() != commonv1.GameStatus_GAME_STATUS_ENDED {
		t.Fatalf("after the end: %v %v", r, err)
	}
	g, err := env.Client.GetGame(gametest.As(ctx, r.GetCredentials()[0].GetToken()), &gamev1.GetGameRequest{GameId: x.id})
	if err != nil || len(g.GetGame().GetMoves()) != 1 {
		t.Fatalf("reading the finished game: %v %v", g, err)
	}
	if w := g.GetGame().GetResult().GetWinner(); w != commonv1.Winner_WINNER_FIRST {
		t.Fatalf("Black's new credential resigned, and the winner is %v, want Red", w)
	}

	// One player in both seats (an operator's test game) gets both.
	both := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Seats: []*gamev1.Seat{
		{Side: commonv1.Side_SIDE_FIRST, PlayerId: "solo"}, {Side: commonv1.Side_SIDE_SECOND, PlayerId: "solo"},
	}})
	r, err = env.Client.IssueSeatCredentials(ctx, &gamev1.IssueSeatCredentialsRequest{GameId: both.id, PlayerId: "solo"})
	if err != nil || len(r.GetCredentials()) != 2 || r.GetCredentials()[0].GetSide() != commonv1.Side_SIDE_FIRST || r.GetCredentials()[1].GetSide() != commonv1.Side_SIDE_SECOND {
		t.Fatalf("a player in both seats: %v %v", r, err)
	}
	for _, c := range r.GetCredentials() {
		if _, err := env.Client.GetGame(gametest.As(ctx, c.GetToken()), &gamev1.GetGameRequest{GameId: both.id}); err != nil {
			t.Fatalf("credential for %v: %v", c.GetSide(), err)
		}
	}
}

// TestIssueSeatCredentialsRefusals: every refusal is named, and none
// writes anything.
func TestIssueSeatCredentialsRefusals(t *testing.T) {
	env := gametest.Start(t, nil)
	ctx := context.Background()
	ai := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(0, 3)})
	keys := func() int { return len(env.Redis.Keys(ctx, env.Config.KeyPrefix+"*").Val()) }
	n, state := keys(), redisState(t, env, ai.id)
	for _, c := range []struct {
		name string
		req  *gamev1.IssueSeatCredentialsRequest
		code codes.Code
		msg  string
	}{
		{"neither player nor side", &gamev1.IssueSeatCredentialsRequest{GameId: ai.id}, codes.InvalidArgument, "player_id or side: one of them is required (a side's name other than SIDE_FIRST or SIDE_SECOND is dropped in JSON"},
		{"both", &gamev1.IssueSeatCredentialsRequest{GameId: ai.id, PlayerId: "p1", Side: commonv1.Side_SIDE_FIRST}, codes.InvalidArgument, "not both"},
		{"an unknown side", &gamev1.IssueSeatCredentialsRequest{GameId: ai.id, Side: 7}, codes.InvalidArgument, "side: 7 is not a side (want SIDE_FIRST or SIDE_SECOND)"},
		{"an over-long player id", &gamev1.IssueSeatCredentialsRequest{GameId: ai.id, PlayerId: strings.Repeat("p", 129)}, codes.InvalidArgument, "player_id: longer than 128 bytes"},
		{"no game id", &gamev1.IssueSeatCredentialsRequest{PlayerId: "p1"}, codes.InvalidArgument, "game_id: required"},
		{"a malformed game id", &gamev1.IssueSeatCredentialsRequest{GameId: "a b", PlayerId: "p1"}, codes.InvalidArgument, "game_id:"},
		{"an unknown game", &gamev1.IssueSeatCredentialsRequest{GameId: "no-such-game", PlayerId: "p1"}, codes.NotFound, "game no-such-game not found"},
		{"a player without a seat", &gamev1.IssueSeatCredentialsRequest{GameId: ai.id, PlayerId: "p3"}, codes.NotFound, `player "p3" holds no seat`},
		{"the AI's player id", &gamev1.IssueSeatCredentialsRequest{GameId: ai.id, PlayerId: "p2"}, codes.FailedPrecondition, `player "p2" is the AI in game`},
		{"the AI's side", &gamev1.IssueSeatCredentialsRequest{GameId: ai.id, Side: commonv1.Side_SIDE_SECOND}, codes.FailedPrecondition, "the AI plays Black"},
	} {
		r, err := env.Client.IssueSeatCredentials(ctx, c.req)
		if msg := status.Convert(err).Message(); status.Code(err) != c.code || !strings.Contains(msg, c.msg) || strings.Contains(msg, "side: side:") {
			t.Errorf("%s: %v %v, want %v naming %q", c.name, r, err, c.code, c.msg)
		}
	}
	if keys() != n || redisState(t, env, ai.id) != state {
		t.Fatal("refused calls changed Redis")
	}
}

// TestCreateGameGivesNoCredentialToAnAISeat: CreateGame answers with the
// human seats' credentials only, first call and retry alike, as
// IssueSeatCredentials issues none for the AI: whoever the answer reaches
// (an app a studio's backend relays it to, a log) cannot resign for the
// AI, offer a draw in its name or race its worker's moves.
func TestCreateGameGivesNoCredentialToAnAISeat(t *testing.T) {
	env := gametest.Start(t, nil)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		req  *gamev1.CreateGameRequest
		want []commonv1.Side
	}{
		{"the AI second", &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(0, 3)}, []commonv1.Side{commonv1.Side_SIDE_FIRST}},
		{"the AI first", &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_JANGGI, Seats: seats(2)}, []commonv1.Side{commonv1.Side_SIDE_SECOND}},
		{"two AI seats", &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(1, 1), Public: true}, nil},
		{"two humans", &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats()}, []commonv1.Side{commonv1.Side_SIDE_FIRST, commonv1.Side_SIDE_SECOND}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, call := range []string{"first call", "retry"} {
				resp, err := env.Client.CreateGame(ctx, c.req)
				if err != nil {
					t.Fatalf("%s: %v", call, err)
				}
				var got []commonv1.Side
				for _, cr := range resp.GetCredentials() {
					got = append(got, cr.GetSide())
				}
				if !slices.Equal(got, c.want) {
					t.Fatalf("%s: credentials for %v, want %v", call, got, c.want)
				}
			}
		})
	}
}

// TestARetryLeavesOutAnAICredentialRememberedBefore: an answer to CreateGame
// remembered by an earlier release holds the AI seat's credential too; a
// retry answered from it must leave that credential out, as a first
// answer now does.
func TestARetryLeavesOutAnAICredentialRememberedBefore(t *testing.T) {
	env := gametest.Start(t, nil)
	ctx := context.Background()
	req := &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(0, 3)}
	first, err := env.Client.CreateGame(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// Rewrite the remembered answer as an earlier release stored it: with
	// a credential for each seat, the AI's second.
	key := env.Config.KeyPrefix + "{g:" + first.GetGameId() + "}"
	stored, err := env.Redis.HGet(ctx, key, "r:"+req.GetRequestId()).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	var label []byte
	if len(stored) > 0 && stored[0] == 0xff {
		i := slices.Index(stored, 0)
		label, stored = stored[:i+1], stored[i+1:]
	}
	var old gamev1.CreateGameResponse
	if err := proto.Unmarshal(stored, &old); err != nil {
		t.Fatal(err)
	}
	ai := env.SeatCredential(t, first.GetGameId(), "p2", commonv1.Side_SIDE_SECOND)
	old.Credentials = append(old.Credentials, &gamev1.SeatCredential{Side: commonv1.Side_SIDE_SECOND, Token: ai, ExpiresAt: old.GetCredentials()[0].GetExpiresAt()})
	b, err := proto.Marshal(&old)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Redis.HSet(ctx, key, "r:"+req.GetRequestId(), append(label, b...)).Err(); err != nil {
		t.Fatal(err)
	}
	again, err := env.Client.CreateGame(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range again.GetCredentials() {
		if c.GetSide() != commonv1.Side_SIDE_FIRST {
			t.Fatalf("the retry hands out a credential for the AI's seat %v", c.GetSide())
		}
	}
	if len(again.GetCredentials()) != 1 {
		t.Fatalf("the retry hands out %d credentials, want the human's alone", len(again.GetCredentials()))
	}
}
