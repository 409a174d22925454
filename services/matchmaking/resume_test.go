package matchmaking_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/matchmaking"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

func (e *env) listGames(p player, max uint32) []*matchmakingv1.GameEntry {
	e.t.Helper()
	r, err := e.mm[0].ListGames(p.ctx(), &matchmakingv1.ListGamesRequest{MaxGames: max})
	if err != nil {
		e.t.Fatalf("ListGames(%s, %d): %v", p.name, max, err)
	}
	return r.GetGames()
}

func other(s commonv1.Side) commonv1.Side {
	if s == commonv1.Side_SIDE_FIRST {
		return commonv1.Side_SIDE_SECOND
	}
	return commonv1.Side_SIDE_FIRST
}

// wantGames checks a list against the entries expected, newest first:
// every field, and creation times that fall, within [from, to].
func wantGames(t *testing.T, who string, got, want []*matchmakingv1.GameEntry, from, to time.Time) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s lists %d games %v, want %d", who, len(got), got, len(want))
	}
	last := to.Add(time.Millisecond)
	for i := range want {
		at := got[i].GetCreatedAt().AsTime()
		if !at.Before(last) || at.Before(from.Truncate(time.Millisecond)) {
			t.Fatalf("%s's game %d (%s) created at %v: want before %v (newest first) and not before %v", who, i, got[i].GetGameId(), at, last, from)
		}
		last = at
		g := proto.Clone(got[i]).(*matchmakingv1.GameEntry)
		g.CreatedAt = nil
		if !proto.Equal(g, want[i]) {
			t.Fatalf("%s's game %d:\n got %v\nwant %v", who, i, g, want[i])
		}
	}
}

// TestListGames makes a game of each kind matchmaking makes, queue,
// invite, rematch and AI, and finds each in its players' lists.
func TestListGames(t *testing.T) {
	e := newEnv(t, 1, nil)
	a, b, c := e.account("7001", "Ann"), e.account("7002", "Ben"), e.guest("Cy")
	// The service's clock, not the machine's, dates the games: it is an
	// hour ahead, and moves between games, so that newest first is one
	// order.
	e.clock.Advance(time.Hour)
	start := e.clock.Now()
	step := func() { e.clock.Advance(time.Second) }

	qa, qb := e.ratedGame(a, b)
	queueTC := e.gameAs(t, qa).GetTimeControl()
	if !proto.Equal(queueTC, store.ControlPB(clock.Default())) {
		t.Fatalf("queue game's control %v, want the default", queueTC)
	}
	step()
	ia, ib := e.friendGame(a, b)
	inviteTC := e.gameAs(t, ia).GetTimeControl()
	step()
	e.resign(t, ib)
	if _, err := e.mm[0].OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: ia.GetGameId()}); err != nil {
		t.Fatal(err)
	}
	acc, err := e.mm[0].AcceptRematch(b.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: ia.GetGameId()})
	if err != nil {
		t.Fatal(err)
	}
	rb := acc.GetRematch().GetSeat()
	step()
	aiReq := &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: xiangqi, Level: 3, Side: commonv1.Side_SIDE_FIRST, TimeControl: fischer(3*time.Minute, 2*time.Second)}
	ai, err := e.mm[0].PlayAi(a.ctx(), aiReq)
	if err != nil {
		t.Fatal(err)
	}
	step()
	// A retry, later, is the same game and the same entry.
	again, err := e.mm[0].PlayAi(a.ctx(), aiReq)
	if err != nil || again.GetSeat().GetGameId() != ai.GetSeat().GetGameId() {
		t.Fatalf("PlayAi retry: %v %v", again, err)
	}
	end := e.clock.Now()

	entry := func(seat *matchmakingv1.Seat, kind commonv1.GameKind, side commonv1.Side, opp player, rated bool, tc *commonv1.TimeControl) *matchmakingv1.GameEntry {
		return &matchmakingv1.GameEntry{GameId: seat.GetGameId(), Kind: kind, Side: side, OpponentId: opp.id, OpponentName: opp.name, Rated: rated, TimeControl: tc}
	}
	aiEntry := &matchmakingv1.GameEntry{
		GameId: ai.GetSeat().GetGameId(), Kind: xiangqi, Side: commonv1.Side_SIDE_FIRST, OpponentId: "ai", OpponentName: "AI level 3",
		TimeControl: fischer(3*time.Minute, 2*time.Second),
	}
	// Each entry says where its game is now. The Janggi games wait for
	// Han (the second side) to choose a formation; the AI game waits for
	// Ann's first move, as Red; Ben resigned the invited game.
	setup := func(en *matchmakingv1.GameEntry) *matchmakingv1.GameEntry {
		en.Status, en.Turn = commonv1.GameStatus_GAME_STATUS_SETUP, commonv1.Side_SIDE_SECOND
		return en
	}
	aiEntry.Status, aiEntry.Turn = commonv1.GameStatus_GAME_STATUS_ONGOING, commonv1.Side_SIDE_FIRST
	resigned := e.gameAs(t, ia)
	if r := resigned.GetResult(); r.GetMethod() != commonv1.EndMethod_END_METHOD_RESIGNATION || r.GetWinner() != map[commonv1.Side]commonv1.Winner{commonv1.Side_SIDE_FIRST: commonv1.Winner_WINNER_FIRST, commonv1.Side_SIDE_SECOND: commonv1.Winner_WINNER_SECOND}[ia.GetSide()] || resigned.GetEndedAt() == nil {
		t.Fatalf("the resigned game: result %v, ended at %v", r, resigned.GetEndedAt())
	}
	ended := func(en *matchmakingv1.GameEntry) *matchmakingv1.GameEntry {
		en.Status, en.Result, en.EndedAt = commonv1.GameStatus_GAME_STATUS_ENDED, resigned.GetResult(), resigned.GetEndedAt()
		return en
	}
	wantA := []*matchmakingv1.GameEntry{
		aiEntry,
		setup(entry(rb, janggi, other(rb.GetSide()), b, false, inviteTC)),
		ended(entry(ia, janggi, ia.GetSide(), b, false, inviteTC)),
		setup(entry(qa, janggi, qa.GetSide(), b, true, queueTC)),
	}
	wantB := []*matchmakingv1.GameEntry{
		setup(entry(rb, janggi, rb.GetSide(), a, false, inviteTC)),
		ended(entry(ib, janggi, ib.GetSide(), a, false, inviteTC)),
		setup(entry(qb, janggi, qb.GetSide(), a, true, queueTC)),
	}
	wantGames(t, "Ann", e.listGames(a, 0), wantA, start, end)
	wantGames(t, "Ben", e.listGames(b, 0), wantB, start, end)

	// max_games cuts the newest; above what is kept is all, not an error.
	wantGames(t, "Ann, 2 of them", e.listGames(a, 2), wantA[:2], start, end)
	wantGames(t, "Ann, 1 of them", e.listGames(a, 1), wantA[:1], start, end)
	wantGames(t, "Ann, 1000 of them", e.listGames(a, 1000), wantA, start, end)

	// Another player sees none of them; its own AI game, without a clock,
	// has none in its entry.
	if got := e.listGames(c, 0); len(got) != 0 {
		t.Fatalf("Cy, who played nothing, lists %v", got)
	}
	cs, err := e.mm[0].PlayAi(c.ctx(), &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: janggi, Level: 10, Side: commonv1.Side_SIDE_SECOND})
	if err != nil {
		t.Fatal(err)
	}
	wantGames(t, "Cy", e.listGames(c, 0), []*matchmakingv1.GameEntry{setup(&matchmakingv1.GameEntry{
		GameId: cs.GetSeat().GetGameId(), Kind: janggi, Side: commonv1.Side_SIDE_SECOND, OpponentId: "ai", OpponentName: "AI level 10",
	})}, end, e.clock.Now())

	_, err = e.mm[0].ListGames(context.Background(), &matchmakingv1.ListGamesRequest{})
	wantCode(t, err, codes.Unauthenticated)
	_, err = e.mm[0].ListGames(as("not-a-credential"), &matchmakingv1.ListGamesRequest{})
	wantCode(t, err, codes.Unauthenticated)
}

// TestListGamesKeepsTheNewest: a player with a full list who makes one
// more game loses the oldest from it.
func TestListGamesKeepsTheNewest(t *testing.T) {
	e := newEnv(t, 1, nil)
	p := e.guest("Busy")
	st := store.New(e.game.Redis, e.cfg.KeyPrefix)
	ctx := context.Background()
	now := e.clock.Now()
	for i := range store.MaxPlayerGames {
		if _, _, err := st.AddPlayerGame(ctx, p.id, store.Entry{
			Game: fmt.Sprintf("old%03d", i), Kind: janggi, Side: "first", Opponent: "ai", OpponentName: "AI level 1",
			Created: now.Add(time.Duration(i-store.MaxPlayerGames) * time.Minute),
		}, 30*24*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.listGames(p, 0); len(got) != store.MaxPlayerGames || got[len(got)-1].GetGameId() != "old000" {
		t.Fatalf("%d games listed before, the last %v", len(got), got[len(got)-1])
	}
	r, err := e.mm[0].PlayAi(p.ctx(), &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: janggi, Level: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := e.listGames(p, 0)
	if len(got) != store.MaxPlayerGames || got[0].GetGameId() != r.GetSeat().GetGameId() || got[len(got)-1].GetGameId() != "old001" {
		t.Fatalf("%d games listed after, the first %v, the last %v: want %d, the new game first, old001 last",
			len(got), got[0], got[len(got)-1], store.MaxPlayerGames)
	}
	// The game service keeps none of the old games: their entries say
	// nothing of where they are.
	if s, old := got[0].GetStatus(), got[len(got)-1]; s != commonv1.GameStatus_GAME_STATUS_SETUP || old.GetStatus() != commonv1.GameStatus_GAME_STATUS_UNSPECIFIED || old.GetTurn() != commonv1.Side_SIDE_UNSPECIFIED {
		t.Fatalf("the new game's status %v, want setup; the oldest game's status %v and turn %v, want neither", s, old.GetStatus(), old.GetTurn())
	}
	// The list lives as long as the game's record: 30 days from its
	// latest game. It holds no more than it shows.
	key := e.cfg.KeyPrefix + "mm:{pl:" + p.id + "}:"
	for _, k := range []string{"g", "gi"} {
		if ttl := e.game.Redis.TTL(ctx, key+k).Val(); ttl < 30*24*time.Hour-time.Minute || ttl > 30*24*time.Hour {
			t.Fatalf("key %s lives %v, want 30 days", k, ttl)
		}
	}
	if n, m := e.game.Redis.ZCard(ctx, key+"g").Val(), e.game.Redis.HLen(ctx, key+"gi").Val(); n != store.MaxPlayerGames || m != store.MaxPlayerGames {
		t.Fatalf("the list's keys hold %d and %d games, want %d", n, m, store.MaxPlayerGames)
	}
}

func (e *env) resume(p player, game string) (*matchmakingv1.ResumeGameResponse, error) {
	return e.mm[0].ResumeGame(p.ctx(), &matchmakingv1.ResumeGameRequest{GameId: game})
}

func TestResumeGame(t *testing.T) {
	e := newEnv(t, 1, nil)
	a, b, c := e.guest("Ann"), e.guest("Ben"), e.guest("Cy")

	// Against the AI: a private game, which only its seat can read.
	ai, err := e.mm[0].PlayAi(a.ctx(), &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: janggi, Level: 2, Side: commonv1.Side_SIDE_SECOND})
	if err != nil {
		t.Fatal(err)
	}
	aiGame := ai.GetSeat().GetGameId()
	if _, err := e.game.Client.GetGame(context.Background(), &gamev1.GetGameRequest{GameId: aiGame}); err == nil {
		t.Fatal("the AI game is readable without its seat's credential: reading it proves nothing")
	}
	r, err := e.resume(a, aiGame)
	if err != nil {
		t.Fatal(err)
	}
	s := r.GetSeat()
	if s.GetGameId() != aiGame || s.GetSide() != commonv1.Side_SIDE_SECOND || s.GetOpponentId() != "ai" || s.GetOpponentName() != "AI level 2" ||
		r.GetStatus() != commonv1.GameStatus_GAME_STATUS_SETUP {
		t.Fatalf("resumed %v: want Ann's seat, second, against AI level 2, in setup", r)
	}
	if d := time.Until(s.GetTokenExpiresAt().AsTime()); d <= 0 {
		t.Fatalf("the new credential expired %v ago", -d)
	}
	if g := e.gameAs(t, s); g.GetGameId() != aiGame {
		t.Fatalf("read game %s with the new credential", g.GetGameId())
	}

	// Between two people: the new credential plays, here resigns.
	sa, sb := e.friendGame(a, b)
	game := sa.GetGameId()
	r, err = e.resume(b, game)
	if err != nil {
		t.Fatal(err)
	}
	s = r.GetSeat()
	if s.GetGameId() != game || s.GetSide() != sb.GetSide() || s.GetOpponentId() != a.id || s.GetOpponentName() != "Ann" ||
		r.GetStatus() != e.gameAs(t, sb).GetStatus() {
		t.Fatalf("Ben resumed %v, want his seat %v against Ann in a game %v", r, sb, e.gameAs(t, sb).GetStatus())
	}
	e.resign(t, s)
	for _, p := range []player{a, b} {
		r, err := e.resume(p, game)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]commonv1.Side{a.id: sa.GetSide(), b.id: sb.GetSide()}[p.id]; r.GetSeat().GetSide() != want ||
			r.GetStatus() != commonv1.GameStatus_GAME_STATUS_ENDED {
			t.Fatalf("%s resumed the resigned game as %v: want side %v, ended", p.name, r, want)
		}
	}

	// A game of others and no game at all read the same.
	for _, id := range []string{aiGame, game, "nosuchgame"} {
		_, err := e.resume(c, id)
		wantCode(t, err, codes.NotFound)
		if msg, want := status.Convert(err).Message(), fmt.Sprintf("no game %s with a seat of yours", id); msg != want {
			t.Fatalf("ResumeGame(%s) by a stranger: %q, want %q", id, msg, want)
		}
	}
	for _, bad := range []string{"", "a b", "a{b}", "a,b", strings.Repeat("g", 65)} {
		_, err := e.resume(a, bad)
		wantCode(t, err, codes.InvalidArgument)
		if !strings.Contains(status.Convert(err).Message(), "game_id") {
			t.Fatalf("ResumeGame(%q): %v, want game_id named", bad, err)
		}
	}
	_, err = e.mm[0].ResumeGame(context.Background(), &matchmakingv1.ResumeGameRequest{GameId: aiGame})
	wantCode(t, err, codes.Unauthenticated)
}

// TestAGameUnlistedIsNotAnnounced: when a game cannot be listed for a
// player, its creation fails and nobody is told of it; the retry of the
// same request lists it, once.
func TestAGameUnlistedIsNotAnnounced(t *testing.T) {
	e := newEnv(t, 1, nil)
	host, friend := e.guest("Host"), e.guest("Friend")
	ctx := context.Background()
	// A key of the wrong type in place of a player's list makes every
	// write to it fail.
	block := func(p player) func() {
		key := e.cfg.KeyPrefix + "mm:{pl:" + p.id + "}:g"
		if err := e.game.Redis.Set(ctx, key, "in the way", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		return func() { e.game.Redis.Del(ctx, key) }
	}

	inv := e.invite(host)
	unblock := block(host)
	if _, err := e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()}); err == nil {
		t.Fatal("AcceptInvite succeeded though the game could not be listed for the host")
	}
	got, err := e.mm[0].GetInvite(host.ctx(), &matchmakingv1.GetInviteRequest{Token: inv.GetToken()})
	if err != nil || got.GetInvite().GetState() != matchmakingv1.InviteState_INVITE_STATE_OPEN || got.GetInvite().GetSeat() != nil {
		t.Fatalf("the host sees %v %v: want the invite still open", got, err)
	}
	unblock()
	acc, err := e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()})
	if err != nil {
		t.Fatal(err)
	}
	game := acc.GetInvite().GetSeat().GetGameId()
	for _, p := range []player{host, friend} {
		if l := e.listGames(p, 0); len(l) != 1 || l[0].GetGameId() != game {
			t.Fatalf("%s lists %v, want game %s once", p.name, l, game)
		}
	}

	// A new player: blocking replaces the list.
	solo := e.guest("Solo")
	req := &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: janggi, Level: 5}
	unblock = block(solo)
	if r, err := e.mm[0].PlayAi(solo.ctx(), req); err == nil {
		t.Fatalf("PlayAi answered %v though the game could not be listed", r)
	}
	unblock()
	r, err := e.mm[0].PlayAi(solo.ctx(), req)
	if err != nil {
		t.Fatal(err)
	}
	if l := e.listGames(solo, 0); len(l) != 1 || l[0].GetGameId() != r.GetSeat().GetGameId() {
		t.Fatalf("Solo lists %v, want the AI game %s once", l, r.GetSeat().GetGameId())
	}
}

// TestListGamesWithoutTheGameService: the list is matchmaking's own; when
// the game service cannot say where the games are (stopped here; or of a
// release without GetGames, during an upgrade), they are listed without.
func TestListGamesWithoutTheGameService(t *testing.T) {
	e := newEnv(t, 1, nil)
	p := e.guest("Solo")
	r, err := e.mm[0].PlayAi(p.ctx(), &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: xiangqi, Level: 1, Side: commonv1.Side_SIDE_FIRST})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.listGames(p, 0); len(got) != 1 || got[0].GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		t.Fatalf("listed %v, want the AI game, ongoing", got)
	}
	e.game.Stop()
	got := e.listGames(p, 0)
	if len(got) != 1 || got[0].GetGameId() != r.GetSeat().GetGameId() || got[0].GetStatus() != commonv1.GameStatus_GAME_STATUS_UNSPECIFIED {
		t.Fatalf("listed %v with the game service stopped, want the game without its status", got)
	}
}

// behindAProxy is one replica whose calls to the game service, each
// bounded by callTimeout, go through a proxy.
func behindAProxy(t *testing.T, callTimeout time.Duration) (*env, *redistest.Proxy) {
	t.Helper()
	var proxy *redistest.Proxy
	e := newEnv(t, 1, func(c *matchmaking.Config) {
		proxy = redistest.NewProxy(t, c.GameAddr)
		c.GameAddr = proxy.Addr()
		c.CallTimeout = callTimeout
	})
	return e, proxy
}

// TestCallsWithTheGameServiceSilent: ListGames promises the player's list
// "rather than not at all" while the game service cannot say where the
// games are. A game service that stopped answering without closing its
// connection (a frozen host, a partition) held the call until gRPC's
// keepalive gave up on the connection (15 s + 5 s): an app with a 10 s
// deadline got DeadlineExceeded and no list, and a game against the AI
// asked for meanwhile waited as long. Each call to the game service is
// bounded by --matchmaking-call-timeout.
func TestCallsWithTheGameServiceSilent(t *testing.T) {
	e, proxy := behindAProxy(t, 2*time.Second)
	p := e.guest("Solo")
	r, err := e.mm[0].PlayAi(p.ctx(), &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: xiangqi, Level: 1, Side: commonv1.Side_SIDE_FIRST})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.listGames(p, 0); len(got) != 1 || got[0].GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		t.Fatalf("listed %v, want the AI game, ongoing", got)
	}
	proxy.Blackhole()
	ctx, cancel := context.WithTimeout(p.ctx(), 10*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := e.mm[0].ListGames(ctx, &matchmakingv1.ListGamesRequest{})
	if err != nil {
		t.Fatalf("ListGames with the game service silent: %v after %v; want the list (without statuses), as when the game service is stopped", err, time.Since(start).Round(time.Millisecond))
	}
	if got := resp.GetGames(); len(got) != 1 || got[0].GetGameId() != r.GetSeat().GetGameId() || got[0].GetStatus() != commonv1.GameStatus_GAME_STATUS_UNSPECIFIED {
		t.Fatalf("listed %v, want the game without its status", got)
	}
	_, err = e.mm[0].PlayAi(ctx, &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: xiangqi, Level: 1, Side: commonv1.Side_SIDE_FIRST})
	wantCode(t, err, codes.Unavailable)
}

// TestListGamesWithinAShortDeadlineAndTheGameServiceSilent: with the
// default --matchmaking-call-timeout (5 s), an app whose own deadline was
// shorter (4 s here) got DeadlineExceeded and no list when the game
// service was silent: the GetGames call took the caller's whole deadline,
// leaving nothing to answer with. It takes at most half of what is left.
func TestListGamesWithinAShortDeadlineAndTheGameServiceSilent(t *testing.T) {
	e, proxy := behindAProxy(t, matchmaking.DefaultConfig().CallTimeout)
	p := e.guest("Solo")
	r, err := e.mm[0].PlayAi(p.ctx(), &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: xiangqi, Level: 1, Side: commonv1.Side_SIDE_FIRST})
	if err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole()
	ctx, cancel := context.WithTimeout(p.ctx(), 4*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := e.mm[0].ListGames(ctx, &matchmakingv1.ListGamesRequest{})
	if err != nil {
		t.Fatalf("ListGames with a 4 s deadline, the game service silent: %v after %v; want the list (without statuses)", err, time.Since(start).Round(time.Millisecond))
	}
	if got := resp.GetGames(); len(got) != 1 || got[0].GetGameId() != r.GetSeat().GetGameId() {
		t.Fatalf("listed %v, want the AI game", got)
	}
}

// TestAPlayAiRetryWithinAShortDeadlineAndTheGameServiceSilent: a PlayAi
// retried after its game was made is answered from matchmaking's record,
// its seat credential freshened when past half its life; when the game
// service cannot freshen it "the answer stands" (handler.fresh). With the
// game service silent, freshening took the whole
// --matchmaking-call-timeout (5 s by default), so an app whose deadline
// was shorter never got the answer matchmaking holds: DeadlineExceeded,
// at every retry, for as long as the game service was silent.
func TestAPlayAiRetryWithinAShortDeadlineAndTheGameServiceSilent(t *testing.T) {
	e, proxy := behindAProxy(t, matchmaking.DefaultConfig().CallTimeout)
	p := e.guest("Solo")
	req := &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: xiangqi, Level: 1, Side: commonv1.Side_SIDE_FIRST}
	r, err := e.mm[0].PlayAi(p.ctx(), req)
	if err != nil {
		t.Fatal(err)
	}
	// The seat credential is past half its life.
	life := r.GetSeat().GetTokenExpiresAt().AsTime().Sub(time.Now())
	e.clock.Advance(life/2 + time.Hour)
	proxy.Blackhole()
	ctx, cancel := context.WithTimeout(p.ctx(), 4*time.Second)
	defer cancel()
	start := time.Now()
	again, err := e.mm[0].PlayAi(ctx, req)
	if err != nil {
		t.Fatalf("PlayAi retried with a 4 s deadline, the game service silent: %v after %v; want the recorded game %s", err, time.Since(start).Round(time.Millisecond), r.GetSeat().GetGameId())
	}
	if again.GetSeat().GetGameId() != r.GetSeat().GetGameId() {
		t.Fatalf("retry answered %v, want %v", again.GetSeat(), r.GetSeat())
	}
}

// TestGetInviteOfAStalledInviteWithinAShortDeadlineAndTheGameServiceSilent:
// a GetInvite of an invite whose friend's claim stalled completes it
// (CreateGame), and on failure answers the invite as it is. With the game
// service silent and the default --matchmaking-call-timeout (5 s), an app
// whose deadline was 4 s got DeadlineExceeded and no invite, however often
// it asked: the completion takes at most half the caller's time left.
func TestGetInviteOfAStalledInviteWithinAShortDeadlineAndTheGameServiceSilent(t *testing.T) {
	e, proxy := behindAProxy(t, matchmaking.DefaultConfig().CallTimeout)
	host, friend := e.guest("Host"), e.guest("Friend")
	inv := e.invite(host)
	st := store.New(e.game.Redis, e.cfg.KeyPrefix)
	if out, err := st.AcceptInvite(context.Background(), inv.GetToken(), friend.id, friend.name, e.clock.Now(), store.FriendFirst); err != nil || out != store.InviteGo {
		t.Fatalf("claim: %v %v", out, err)
	}
	e.clock.Advance(11 * time.Second) // the claim stalled
	proxy.Blackhole()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	start := time.Now()
	got, err := e.mm[0].GetInvite(ctx, &matchmakingv1.GetInviteRequest{Token: inv.GetToken()})
	if err != nil {
		t.Fatalf("GetInvite with a 4 s deadline, the game service silent: %v after %v; want the invite as it is",
			err, time.Since(start).Round(time.Millisecond))
	}
	if got.GetInvite().GetToken() != inv.GetToken() {
		t.Fatalf("got %v", got)
	}
}

// TestAnExpiredCredentialWasHandedOutThoughTheGameServiceAnsweredInTime:
// a PlayAi retry answered from the record freshens a credential that ran
// out ("every answer naming the caller's seat of a recorded game carries
// a credential that works"). Bounded to half the caller's time left, as a
// credential still good is, the freshening of one run out gave up at 1.5 s
// on a game service answering in 2 s, within the caller's 3 s, and handed
// the client the expired credential, which the game service refuses.
func TestAnExpiredCredentialWasHandedOutThoughTheGameServiceAnsweredInTime(t *testing.T) {
	const ttl = 3 * time.Second
	var proxy *redistest.Proxy
	e := newEnvOn(t, redistest.Addr(t), func(c *game.Config) { c.SeatTTL = ttl }, 1, func(c *matchmaking.Config) {
		proxy = redistest.NewProxy(t, c.GameAddr)
		c.GameAddr = proxy.Addr()
	})
	a := e.guest("Ann")
	req := &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: xiangqi, Level: 1, Side: commonv1.Side_SIDE_FIRST}
	r, err := e.mm[0].PlayAi(a.ctx(), req)
	if err != nil {
		t.Fatal(err)
	}
	first := r.GetSeat()
	time.Sleep(time.Until(first.GetTokenExpiresAt().AsTime()) + 200*time.Millisecond)

	// The game service is slow: it answers 2 s after being asked.
	proxy.Hold()
	go func() {
		time.Sleep(2 * time.Second)
		proxy.Restore()
	}()
	ctx, cancel := context.WithTimeout(a.ctx(), 3*time.Second)
	defer cancel()
	again, err := e.mm[0].PlayAi(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if again.GetSeat().GetGameId() != first.GetGameId() {
		t.Fatalf("the retry answered game %s, want %s", again.GetSeat().GetGameId(), first.GetGameId())
	}
	if exp := again.GetSeat().GetTokenExpiresAt().AsTime(); !exp.After(time.Now()) {
		t.Errorf("the retry of PlayAi answered a credential that expired %v ago, though the game service answered within the caller's deadline",
			time.Since(exp).Round(time.Millisecond))
	}
	if err := seatWorks(e, again.GetSeat()); err != nil {
		t.Errorf("the seat answered does not work: %v", err)
	}
}
