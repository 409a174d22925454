package game_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/apptest"
	"github.com/palacehq/palace/pkg/auth"
	"github.com/palacehq/palace/pkg/deadline"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// TestInternalCallsNeedAServiceCredential: players reach the game service
// directly, so a player's app must not create games (each hands out both
// seats' credentials and is kept for weeks), expire deadlines or fill
// Redis with probe counters. Each refusal changes nothing in Redis; the
// same calls with a service credential go through.
func TestInternalCallsNeedAServiceCredential(t *testing.T) {
	// Seat credentials signed with the service keys too, so that only the
	// kind of credential tells them apart.
	env := gametest.Start(t, func(c *game.Config) { c.SigningKeys = apptest.ServiceKeys })
	ctx := context.Background()
	cc, err := grpc.NewClient(env.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	player := gamev1.NewGameServiceClient(cc)

	// A clocked game whose first-move deadline is due: only the guard
	// stands between ExpireDeadline and aborting it.
	tb := create(t, env, &gamev1.CreateGameRequest{
		Kind:          commonv1.GameKind_GAME_KIND_XIANGQI,
		TimeControl:   &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(time.Minute)}}},
		FirstMoveTime: durationpb.New(time.Second),
	})
	time.Sleep(1100 * time.Millisecond)
	idx, err := deadline.New(env.Redis, env.Config.KeyPrefix, env.Config.DeadlineShards)
	if err != nil {
		t.Fatal(err)
	}
	var due deadline.Entry
	for s := range idx.Shards() {
		es, err := idx.Due(ctx, s, time.Now(), 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.GameID == tb.id {
				due = e
			}
		}
	}
	if due.GameID == "" {
		t.Fatal("the game's first-move deadline is not in the index")
	}

	otherKeys, err := auth.NewKeyring(auth.Key{ID: "other", Secret: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := auth.ServiceToken(otherKeys, "intruder", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	foreignSeat, err := otherKeys.Sign(auth.Claims{Kind: auth.KindSeat, Game: tb.id, Side: "first", IssuedAt: time.Now().Unix(), ExpiresAt: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	withService := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, auth.ServiceHeader, tok)
	}
	seatToken := tb.seats[commonv1.Side_SIDE_FIRST]

	callers := []struct {
		name     string
		ctx      context.Context
		wantCode codes.Code
		wantMsg  string
	}{
		{"no credential", ctx, codes.Unauthenticated, auth.ServiceHeader},
		{"a seat credential as a player sends it", tb.as(commonv1.Side_SIDE_FIRST), codes.Unauthenticated, "internal call"},
		{"a seat credential as a service credential", withService(seatToken), codes.PermissionDenied, "player's credential"},
		{"a service credential signed with other keys", withService(foreign), codes.Unauthenticated, "unknown key"},
		{"garbage", withService("not-a-token"), codes.Unauthenticated, "malformed"},
		{"a seat credential signed with other keys", withService(foreignSeat), codes.Unauthenticated, "this is a seat credential (one game's seat: from a pairing, an invite, a rematch, PlayAi or ResumeGame of matchmaking, or from CreateGame or IssueSeatCredentials), not a service credential (signed with PALACE_SERVICE_KEYS"},
	}
	calls := []struct {
		name string
		call func(context.Context) error
	}{
		{"CreateGame", func(ctx context.Context) error {
			_, err := player.CreateGame(ctx, &gamev1.CreateGameRequest{RequestId: "player-made", Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats()})
			return err
		}},
		{"ExpireDeadline", func(ctx context.Context) error {
			_, err := player.ExpireDeadline(ctx, &gamev1.ExpireDeadlineRequest{GameId: due.GameID, DeadlineUnixMs: due.At.UnixMilli()})
			return err
		}},
		{"Probe", func(ctx context.Context) error {
			_, err := player.Probe(ctx, &gamev1.ProbeRequest{Key: "player-probe"})
			return err
		}},
		{"GetGames", func(ctx context.Context) error {
			_, err := player.GetGames(ctx, &gamev1.GetGamesRequest{GameIds: []string{tb.id}})
			return err
		}},
		{"IssueSeatCredentials", func(ctx context.Context) error {
			_, err := player.IssueSeatCredentials(ctx, &gamev1.IssueSeatCredentialsRequest{GameId: tb.id, Side: commonv1.Side_SIDE_SECOND})
			return err
		}},
	}
	keys := func() []string { return env.Redis.Keys(ctx, env.Config.KeyPrefix+"*").Val() }
	before, state := len(keys()), redisState(t, env, tb.id)
	for _, c := range callers {
		for _, call := range calls {
			err := call.call(c.ctx)
			if status.Code(err) != c.wantCode || !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("%s with %s: %v, want %v naming %q", call.name, c.name, err, c.wantCode, c.wantMsg)
			}
		}
	}
	if n := len(keys()); n != before {
		t.Errorf("refused calls changed Redis: %d keys, %d before", n, before)
	}
	if s := redisState(t, env, tb.id); s != state {
		t.Errorf("refused ExpireDeadline changed the game:\n%s\nwas\n%s", s, state)
	}

	// With a service credential the same calls go through.
	r, err := env.Client.ExpireDeadline(ctx, &gamev1.ExpireDeadlineRequest{GameId: due.GameID, DeadlineUnixMs: due.At.UnixMilli()})
	if err != nil || !r.GetApplied() {
		t.Fatalf("ExpireDeadline as a service: %v, applied %v", err, r.GetApplied())
	}
	if _, err := env.Client.CreateGame(ctx, &gamev1.CreateGameRequest{RequestId: "service-made", Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats()}); err != nil {
		t.Fatalf("CreateGame as a service: %v", err)
	}
	for range 2 {
		if _, err := env.Client.Probe(ctx, &gamev1.ProbeRequest{Key: "service-probe"}); err != nil {
			t.Fatalf("Probe as a service: %v", err)
		}
	}
	// Every load test leaves a counter: it must not stay for ever.
	if ttl := env.Redis.PTTL(ctx, env.Config.KeyPrefix+"probe:{service-probe}").Val(); ttl <= 0 || ttl > time.Hour {
		t.Fatalf("probe counter lives %v, want at most an hour", ttl)
	}
}

// TestKeyPrefixWithABraceIsRefused: every key of a game shares the hash
// tag {g:<id>}, which a brace in the prefix would take the place of.
func TestKeyPrefixWithABraceIsRefused(t *testing.T) {
	t.Parallel()
	cfg := game.DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	cfg.KeyPrefix = "{prod}:"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--key-prefix") {
		t.Fatalf("Validate() = %v, want an error naming --key-prefix", err)
	}
}

// TestExpiriesUnderAMillisecondAreRefused: Redis is given expiries in
// whole milliseconds, and a commit given none keeps the game's: a
// --live-ttl of 500us (meant as 500s) kept every game for ever, and such
// a --retention kept finished games for the live expiry.
func TestExpiriesUnderAMillisecondAreRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		flag string
		edit func(*game.Config)
	}{
		{"--live-ttl", func(c *game.Config) { c.LiveTTL = 500 * time.Microsecond }},
		{"--retention", func(c *game.Config) { c.Retention = time.Nanosecond }},
	} {
		cfg := game.DefaultConfig()
		c.edit(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("Validate() with %s under a millisecond = %v, want an error naming it", c.flag, err)
		}
	}
	cfg := game.DefaultConfig()
	cfg.LiveTTL, cfg.Retention = time.Millisecond, time.Millisecond
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate() with expiries of 1ms = %v, want them accepted", err)
	}
}

// TestDefaultTimesOutOfRangeAreRefused: a default setup or first-move time
// that CreateGame would refuse stops the service at start, instead of
// failing every game with a complaint about fields the client never sent.
func TestDefaultTimesOutOfRangeAreRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		flag string
		edit func(*game.Config)
	}{
		{"--setup-time", func(c *game.Config) { c.SetupTime = 500 * time.Millisecond }},
		{"--setup-time", func(c *game.Config) { c.SetupTime = 2 * time.Hour }},
		{"--first-move-time", func(c *game.Config) { c.FirstMoveTime = 500 * time.Millisecond }},
		{"--first-move-time", func(c *game.Config) { c.FirstMoveTime = 25 * time.Hour }},
	} {
		cfg := game.DefaultConfig()
		c.edit(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("Validate() with %s %v, %v = %v, want an error naming %s", c.flag, cfg.SetupTime, cfg.FirstMoveTime, err, c.flag)
		}
	}
}

// TestWrongKindOfCredentialIsNamed: a credential of another kind sent as a
// seat credential is refused with what it is, rather than a signature
// error that reads like a key mismatch.
func TestWrongKindOfCredentialIsNamed(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI})
	ring, err := auth.ParseKeyring(apptest.ServiceKeys)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := auth.ServiceToken(ring, "ops", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+svc)
	_, err = env.Client.GetGame(ctx, &gamev1.GetGameRequest{GameId: tb.id})
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), "this is a service credential (signed with PALACE_SERVICE_KEYS, as palace service-token prints), not a seat credential") {
		t.Fatalf("a service credential sent as a seat's: %v", err)
	}
}

// TestSeatCredentialOfAnUnknownSideIsRefused: a validly signed seat
// credential whose side no reader knows is refused, naming the side.
func TestSeatCredentialOfAnUnknownSideIsRefused(t *testing.T) {
	env := gametest.Start(t, func(c *game.Config) { c.SigningKeys = keyOne })
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI})
	ring, err := auth.ParseKeyring(keyOne)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := ring.Sign(auth.Claims{Kind: auth.KindSeat, Subject: "p1", Game: tb.id, Side: "third", IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = env.Client.MakeMove(gametest.As(context.Background(), tok), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h3e3"}})
	wantCode(t, err, codes.Unauthenticated)
	if msg := status.Convert(err).Message(); !strings.Contains(msg, `unknown side "third"`) {
		t.Fatalf("refused with %q, want the side named", msg)
	}
}

// TestAWakeUpWithNothingDueMovesOnAndIsIndexedAnew: a game stored with its
// wake-up on a milestone announced already (what a build that set wake-ups
// from now could leave after an excuse that another process's announcement
// overtook) must not lose its wake-up when it falls due. The sweeper drops
// an entry that is not applied, and nothing would look at the game again:
// no flag, ever. ExpireDeadline applies it, as an excuse, moving the
// wake-up to the next milestone in a change without events, so the version
// stays; the deadline index then holds the new instant and not the old, and
// the game plays on.
func TestAWakeUpWithNothingDueMovesOnAndIsIndexedAnew(t *testing.T) {
	env := gametest.Start(t, nil)
	ctx := context.Background()
	x := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: &commonv1.TimeControl{
		Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{MainTime: durationpb.New(time.Minute), Periods: 3, PeriodTime: durationpb.New(30 * time.Second)}}}})
	x.move(t, "h3e3")
	x.move(t, "h10g8") // both first moves made: Red's clock runs
	// Milestones announced up to 5 s from now, and the wake-up a second
	// ago, indexed as the commit that set it would have.
	now := time.Now().UnixMilli()
	planted := now - 1000
	editStored(t, env, x.id, func(st map[string]any) string {
		st["wake"], st["clkev"] = planted, now+5000
		return ""
	})
	index, err := deadline.New(env.Redis, env.Config.KeyPrefix, env.Config.DeadlineShards)
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Add(ctx, deadline.Entry{GameID: x.id, At: time.UnixMilli(planted)}); err != nil {
		t.Fatal(err)
	}
	before := x.get(t).GetVersion()

	r, err := env.Client.ExpireDeadline(ctx, &gamev1.ExpireDeadlineRequest{GameId: x.id, DeadlineUnixMs: planted})
	if err != nil || !r.GetApplied() || !r.GetExcused() {
		t.Fatalf("ExpireDeadline of a wake-up with nothing due: %v, applied %v, excused %v; want applied as an excuse", err, r.GetApplied(), r.GetExcused())
	}
	if v := x.get(t).GetVersion(); v != before {
		t.Fatalf("version %d after moving the wake-up on, want %d: no event, no new version", v, before)
	}
	var at []int64
	for _, z := range env.Redis.ZRangeWithScores(ctx, index.Key(index.ShardOf(x.id)), 0, -1).Val() {
		if e, err := deadline.ParseMember(z.Member.(string)); err == nil && e.GameID == x.id {
			at = append(at, e.At.UnixMilli())
		}
	}
	// Red's main time ends about a minute after its turn began.
	if len(at) != 1 || at[0] <= now+5000 || at[0] > now+time.Minute.Milliseconds()+5000 {
		t.Fatalf("the game's index entries are at %v (now %d), want one, at the next milestone after the mark", at, now)
	}
	// The change without events left a stamp the next command commits on.
	x.move(t, "h1g3")
}

// editStored rewrites game id's stored state through edit, as another
// build's commit could have left it, with the stamp edit returns ("": the
// stamp kept).
func editStored(t *testing.T, env *gametest.Env, id string, edit func(map[string]any) (stamp string)) {
	t.Helper()
	ctx := context.Background()
	key := env.Config.KeyPrefix + "{g:" + id + "}"
	raw, err := env.Redis.HGet(ctx, key, "s").Result()
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatal(err)
	}
	fields := []any{"s", nil}
	if stamp := edit(st); stamp != "" {
		fields = append(fields, "n", stamp)
	}
	if fields[1], err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if err := env.Redis.HSet(ctx, key, fields...).Err(); err != nil {
		t.Fatal(err)
	}
}
