package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/apptest"
	"github.com/palacehq/palace/pkg/auth"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
)

// TestServiceTokenCreatesGamesAndPlayersCannot: `palace service-token`
// prints a credential an operator's tool sends to create a game; without
// it, or with one signed by other keys (a `palace keygen` key), the game
// service refuses, and a load tool without the keys stops at once and
// says which flag it lacks.
func TestServiceTokenCreatesGamesAndPlayersCannot(t *testing.T) {
	addr := startServe(t, "--ai-workers", "0")
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	games := gamev1.NewGameServiceClient(cc)
	create := func(tok string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if tok != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, auth.ServiceHeader, tok)
		}
		_, err := games.CreateGame(ctx, &gamev1.CreateGameRequest{
			RequestId: "by-hand-" + tok[:min(len(tok), 8)], Kind: commonv1.GameKind_GAME_KIND_XIANGQI,
			Seats: []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST}, {Side: commonv1.Side_SIDE_SECOND}},
		})
		return err
	}

	out, errOut, code := palace("service-token", "--caller", "tournament", "--ttl", "10m")
	if code != exitOK {
		t.Fatalf("service-token: exit %d: %s", code, errOut)
	}
	tok := strings.TrimSpace(out)
	if err := create(tok); err != nil {
		t.Fatalf("CreateGame with a service-token credential: %v", err)
	}
	ring, err := auth.ParseKeyring(apptest.ServiceKeys)
	if err != nil {
		t.Fatal(err)
	}
	c, err := auth.VerifyService(auth.NewVerified(ring, 1), tok, time.Now())
	if err != nil || c.Subject != "tournament" || c.Expires().After(time.Now().Add(10*time.Minute+time.Second)) {
		t.Fatalf("the credential reads %+v, %v; want the caller tournament for 10 minutes", c, err)
	}

	if err := create(""); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("CreateGame without a credential: %v, want Unauthenticated", err)
	}
	key, errOut, code := palace("keygen")
	if code != exitOK {
		t.Fatalf("keygen: exit %d: %s", code, errOut)
	}
	if _, err := auth.ParseKeyring(strings.TrimSpace(key)); err != nil {
		t.Fatalf("keygen printed %q, which is not a key: %v", key, err)
	}
	// Two keys made the same day can sit in one ring.
	key2, _, _ := palace("keygen")
	if _, err := auth.ParseKeyring(strings.TrimSpace(key2) + "," + strings.TrimSpace(key)); err != nil {
		t.Fatalf("two keys of keygen do not make a ring: %v", err)
	}
	other, _, code := palace("service-token", "--service-keys", strings.TrimSpace(key))
	if code != exitOK {
		t.Fatalf("service-token with a new key: exit %d", code)
	}
	if err := create(strings.TrimSpace(other)); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("CreateGame with a credential of other keys: %v, want Unauthenticated", err)
	}

	t.Setenv("PALACE_SERVICE_KEYS", "")
	for _, tool := range []string{"games", "clocks"} {
		_, errOut, code := palace("loadtest", tool, "--addr", addr)
		if code != exitUsage || !strings.Contains(errOut, "--service-keys") {
			t.Errorf("loadtest %s without keys: exit %d, %q; want usage naming --service-keys", tool, code, errOut)
		}
	}
	if _, errOut, code := palace("service-token"); code != exitUsage || !strings.Contains(errOut, "--service-keys") {
		t.Errorf("service-token without keys: exit %d, %q", code, errOut)
	}
	if _, _, code := palace("service-token", "--service-keys", "k:00", "--ttl", "-1s"); code != exitUsage {
		t.Errorf("service-token with a negative ttl: exit %d", code)
	}
	// A credential expires on a whole second: one of a millisecond would
	// be printed expired.
	if _, errOut, code := palace("service-token", "--service-keys", "k:00", "--ttl", "1ms"); code != exitUsage || !strings.Contains(errOut, "at least 1s") {
		t.Errorf("service-token with a ttl under a second: exit %d, %q", code, errOut)
	}
}

// TestServeWithoutServiceKeysTrustsOnlyItself: `make run` has no
// --service-keys, so its services share a random key: matchmaking still
// creates its games through the game service, while a load tool with
// keys of its own is refused.
func TestServeWithoutServiceKeysTrustsOnlyItself(t *testing.T) {
	t.Setenv("PALACE_SERVICE_KEYS", "")
	addr := startServe(t, "--ai-workers", "0", "--pairing-interval", "50ms")
	out, errOut, code := palace("loadtest", "matchmaking", "--addr", addr, "--game-addr", addr, "--tickets", "20", "--timeout", "60s")
	if code != exitOK {
		t.Fatalf("loadtest matchmaking: exit %d: %s", code, errOut)
	}
	var mm mmReport
	lastJSON(t, out, &mm)
	if mm.Games == 0 || mm.GamesChecked != mm.Games || mm.Errors != 0 {
		t.Fatalf("matchmaking could not create its games: %+v\n%s", mm, errOut)
	}
	out, errOut, code = palace("loadtest", "games", "--addr", addr, "--games", "2", "--duration", "1s", "--floor=false", "--service-keys", apptest.ServiceKeys)
	if code != exitFail {
		t.Fatalf("loadtest games refused everything: exit %d, want %d for the errors: %s", code, exitFail, errOut)
	}
	var g gamesReport
	lastJSON(t, out, &g)
	if g.Games != 0 || g.Errors == 0 || !strings.Contains(errOut, "Unauthenticated") {
		t.Fatalf("an outsider's games were not refused: %+v\n%s", g, errOut)
	}
}

// TestPlayerTokenPlaysRated: `palace player-token` mints an account
// credential with the player signing keys, which matchmaking takes for
// rated play under the id and name given; ids that sign-ins make, bad
// names and a missing key are refused before anything is signed, and a
// credential signed with other keys is refused by the server.
func TestPlayerTokenPlaysRated(t *testing.T) {
	keys := "pt:" + strings.Repeat("ab", 32)
	addr := startServe(t, "--ai-workers", "0", "--player-signing-keys", keys)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	mm := matchmakingv1.NewMatchmakingServiceClient(cc)
	as := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
	}
	out, errOut, code := palace("player-token", "--player-signing-keys", keys, "--player-id", "club-7", "--name", " Ada ", "--ttl", "1h")
	if code != exitOK {
		t.Fatalf("player-token: exit %d: %s", code, errOut)
	}
	tok := strings.TrimSpace(out)
	ring, err := auth.ParseKeyring(keys)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := ring.Verify(tok, time.Now()); err != nil || c.Kind != auth.KindAccount || c.Subject != "club-7" || c.Name != "Ada" ||
		c.Expires().After(time.Now().Add(time.Hour+time.Second)) {
		t.Fatalf("the credential says %+v (%v), want the account club-7, Ada, for an hour", c, err)
	}
	r, err := mm.EnterQueue(as(tok), &matchmakingv1.EnterQueueRequest{RequestId: "r1", Kind: commonv1.GameKind_GAME_KIND_JANGGI, Rated: true})
	if err != nil {
		t.Fatalf("a rated entry with the minted credential: %v", err)
	}
	rating, err := mm.GetRating(as(tok), &matchmakingv1.GetRatingRequest{Kind: commonv1.GameKind_GAME_KIND_JANGGI})
	if err != nil || rating.GetRating().GetPlayerId() != "club-7" || r.GetTicket().GetTicketId() == "" {
		t.Fatalf("GetRating: %v %v, want club-7's", rating, err)
	}
	other, _, _ := palace("player-token", "--player-signing-keys", "x:"+strings.Repeat("cd", 32), "--player-id", "club-7", "--name", "Ada")
	if _, err := mm.GetRating(as(strings.TrimSpace(other)), &matchmakingv1.GetRatingRequest{Kind: commonv1.GameKind_GAME_KIND_JANGGI}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a credential signed with other keys: %v, want Unauthenticated", err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--player-id", "google-123", "--name", "Ada"}, `"google-123" begins "google-"`},
		{[]string{"--player-id", "guest-1", "--name", "Ada"}, `begins "guest-"`},
		{[]string{"--player-id", "google#1", "--name", "Ada"}, `begins "google#"`},
		{[]string{"--player-id", "ai", "--name", "Ada"}, "the AI's"},
		// The ratings RPCs read "me" as the caller: nobody could look up
		// such a player's rating, or the leaderboard around them.
		{[]string{"--player-id", "me", "--name", "Ada"}, `"me" stands for the caller`},
		{[]string{"--player-id", "club:7", "--name", "Ada"}, "contains ':'"},
		{[]string{"--player-id", "club-7", "--name", "Ada", "--ttl", "721h"}, "at most 30 days"},
		{[]string{"--player-id", "a{b}", "--name", "Ada"}, "--player-id: contains"},
		{[]string{"--player-id", "club-7", "--name", strings.Repeat("x", 25)}, "--name:"},
		{[]string{"--player-id", "club-7", "--name", "Ada", "--ttl", "0s"}, "--ttl"},
		{[]string{"--player-id", "club-7", "--name", "Ada", "--ttl", "500ms"}, "at least 1s"},
	} {
		out, errOut, code := palace(append([]string{"player-token", "--player-signing-keys", keys}, tt.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, %q %q; want %d saying %q", tt.args, code, out, errOut, exitUsage, tt.want)
		}
	}
	t.Setenv("PALACE_PLAYER_SIGNING_KEYS", "")
	if _, errOut, code := palace("player-token", "--player-id", "club-7", "--name", "Ada"); code != exitUsage || !strings.Contains(errOut, "--player-signing-keys") {
		t.Errorf("without keys: exit %d, %q", code, errOut)
	}
}
