package matchmaking_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/apierr"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// ratedGame pairs two accounts in the rated Janggi pool and returns their
// seats.
func (e *env) ratedGame(a, b player) (*matchmakingv1.Seat, *matchmakingv1.Seat) {
	e.t.Helper()
	ta := e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{Rated: true})
	tb := e.enter(e.mm[len(e.mm)-1], b, &matchmakingv1.EnterQueueRequest{Rated: true})
	ra := waitTicket(e.t, e.mm[0], a, ta.GetTicketId(), 10*time.Second)
	rb := waitTicket(e.t, e.mm[0], b, tb.GetTicketId(), 10*time.Second)
	if ra.GetState() != matched || rb.GetState() != matched {
		e.t.Fatalf("rated tickets ended %v / %v", ra, rb)
	}
	return ra.GetSeat(), rb.GetSeat()
}

func (e *env) rating(p player, who string) *matchmakingv1.Rating {
	e.t.Helper()
	r, err := e.mm[0].GetRating(p.ctx(), &matchmakingv1.GetRatingRequest{Kind: janggi, PlayerId: who})
	if err != nil {
		e.t.Fatalf("GetRating: %v", err)
	}
	return r.GetRating()
}

func TestRatedGameUpdatesElo(t *testing.T) {
	// Two replicas with short leases: both follow rated games at times, so
	// the ending may be seen twice; it must count once.
	e := newEnv(t, 2, func(c *matchmaking.Config) { c.RatingLease = 300 * time.Millisecond })
	a, b := e.account("4001", "Winner"), e.account("4002", "Loser")
	if r := e.rating(a, ""); r.GetRating() != 1200 || r.GetGames() != 0 || r.GetRank() != 0 || !r.GetProvisional() {
		t.Fatalf("new player %v: want 1200, no games, unranked, provisional", r)
	}
	sa, sb := e.ratedGame(a, b)
	if g := e.gameAs(t, sa); !g.GetRated() {
		t.Fatal("the game is not rated")
	}
	e.resign(t, sb)
	eventually(t, 10*time.Second, "the rating to change", func() bool { return e.rating(a, "").GetGames() == 1 })
	time.Sleep(time.Second) // leases change hands a few times: still one application

	// K = 40 for a first game between equals: 40 x 0.5 = 20 points.
	ra, rb := e.rating(a, ""), e.rating(b, "")
	if ra.GetRating() != 1220 || rb.GetRating() != 1180 || ra.GetGames() != 1 || rb.GetGames() != 1 {
		t.Fatalf("after one game: %v / %v, want 1220 and 1180", ra, rb)
	}
	if ra.GetRank() != 1 || rb.GetRank() != 2 {
		t.Fatalf("ranks %d, %d", ra.GetRank(), rb.GetRank())
	}
	// Another player's rating by id.
	if r := e.rating(a, b.id); r.GetRating() != 1180 || r.GetDisplayName() != "Loser" {
		t.Fatalf("Loser seen by Winner: %v", r)
	}

	h, err := e.mm[0].GetRatingHistory(b.ctx(), &matchmakingv1.GetRatingHistoryRequest{Kind: janggi})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.GetChanges()) != 1 {
		t.Fatalf("history %v: want exactly one change", h)
	}
	c := h.GetChanges()[0]
	if c.GetGameId() != sa.GetGameId() || c.GetScore() != 0 || c.GetRatingBefore() != 1200 || c.GetRatingAfter() != 1180 || c.GetOpponentId() != a.id || c.GetOpponentRatingBefore() != 1200 {
		t.Fatalf("history entry %v", c)
	}

	lb, err := e.mm[0].GetLeaderboard(a.ctx(), &matchmakingv1.GetLeaderboardRequest{Kind: janggi})
	if err != nil {
		t.Fatal(err)
	}
	if lb.GetTotal() != 2 || len(lb.GetEntries()) != 2 || lb.GetEntries()[0].GetRating().GetPlayerId() != a.id || lb.GetEntries()[1].GetRank() != 2 {
		t.Fatalf("leaderboard %v", lb)
	}
	around, err := e.mm[0].GetLeaderboard(b.ctx(), &matchmakingv1.GetLeaderboardRequest{Kind: janggi, AroundPlayerId: "me", Limit: 1})
	if err != nil || len(around.GetEntries()) != 2 {
		t.Fatalf("around me: %v %v", around, err)
	}
	_, err = e.mm[0].GetLeaderboard(a.ctx(), &matchmakingv1.GetLeaderboardRequest{Kind: xiangqi, AroundPlayerId: "me"})
	wantCode(t, err, codes.NotFound)

	// The next rated ticket is paired by the new rating.
	tk := e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{Rated: true})
	if tk.GetRating() != 1220 {
		t.Fatalf("ticket rating %d, want 1220", tk.GetRating())
	}
	// And a rated rematch is rated too, sides swapped.
	if _, err := e.mm[0].OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: sa.GetGameId()}); err != nil {
		t.Fatal(err)
	}
	rm, err := e.mm[0].AcceptRematch(b.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: sa.GetGameId()})
	if err != nil {
		t.Fatal(err)
	}
	e.resign(t, rm.GetRematch().GetSeat()) // b resigns again
	eventually(t, 10*time.Second, "the rematch to be rated", func() bool { return e.rating(a, "").GetGames() == 2 })
	if r := e.rating(a, ""); r.GetRating() <= 1220 {
		t.Fatalf("after winning the rematch: %v", r)
	}
}

func TestRatingsNeedAnAccount(t *testing.T) {
	e := newEnv(t, 1, nil)
	g := e.guest("Guest")
	_, err := e.mm[0].GetLeaderboard(g.ctx(), &matchmakingv1.GetLeaderboardRequest{Kind: janggi})
	wantCode(t, err, codes.PermissionDenied)
	_, err = e.mm[0].GetRating(g.ctx(), &matchmakingv1.GetRatingRequest{Kind: janggi})
	wantCode(t, err, codes.PermissionDenied)
	_, err = e.mm[0].GetRatingHistory(g.ctx(), &matchmakingv1.GetRatingHistoryRequest{Kind: janggi})
	wantCode(t, err, codes.PermissionDenied)
	acct := e.account("5001", "A")
	_, err = e.mm[0].GetRating(acct.ctx(), &matchmakingv1.GetRatingRequest{Kind: commonv1.GameKind_GAME_KIND_UNSPECIFIED})
	wantCode(t, err, codes.InvalidArgument)
	// JSON drops a misspelt kind's name: the message says it may be that.
	if !strings.Contains(err.Error(), "kind: unset, or a name that is not a game kind") {
		t.Fatalf("an unset kind: %v", err)
	}
	_, err = e.mm[0].GetLeaderboard(acct.ctx(), &matchmakingv1.GetLeaderboardRequest{Kind: janggi, Limit: 101})
	wantCode(t, err, codes.InvalidArgument)
}

func TestRatingSurvivesRestart(t *testing.T) {
	e := newEnv(t, 0, func(c *matchmaking.Config) { c.RatingLease = time.Second })
	stop := e.startReplica()
	a, b := e.account("6001", "A"), e.account("6002", "B")
	sa, _ := e.ratedGame(a, b)
	// The only replica leases the game to follow it, then stops; the game
	// ends while no matchmaker runs.
	eventually(t, 5*time.Second, "the replica to lease the game", func() bool {
		lease, err := e.game.Redis.ZScore(context.Background(), e.cfg.KeyPrefix+"mm:{pending}:z", sa.GetGameId()).Result()
		return err == nil && lease > 0
	})
	stop()
	e.resign(t, sa)
	e.mm = nil
	e.startReplica()
	eventually(t, 15*time.Second, "a restarted matchmaker to rate the game", func() bool {
		r, err := e.mm[0].GetRating(b.ctx(), &matchmakingv1.GetRatingRequest{Kind: janggi})
		return err == nil && r.GetRating().GetRating() == 1220
	})
	if r := e.rating(a, ""); r.GetRating() != 1180 || r.GetGames() != 1 {
		t.Fatalf("A: %v", r)
	}
}

// TestAnAbortedMatchCountsForNobody: a player who does not want the game
// the queue made aborts it before the first moves, without a loss; the
// next game, played out, is each player's first rated one. The abort is
// counted against the player who aborted, for all to see.
func TestAnAbortedMatchCountsForNobody(t *testing.T) {
	e := newEnv(t, 1, nil)
	a, b := e.account("4101", "Stays"), e.account("4102", "Leaves")
	sa, sb := e.ratedGame(a, b)
	if g := e.gameAs(t, sa); !g.GetPlayersMayAbort() {
		t.Fatal("a queue game does not let its players abort it")
	}
	resp, err := e.game.Client.Abort(as(sb.GetToken()), &gamev1.AbortRequest{GameId: sb.GetGameId(), RequestId: rid()})
	if err != nil || resp.GetGame().GetStatus() != commonv1.GameStatus_GAME_STATUS_ABORTED {
		t.Fatalf("Abort: %v, %v", resp.GetGame().GetStatus(), err)
	}
	eventually(t, 10*time.Second, "the abort to be counted", func() bool { return e.rating(b, "").GetAborts() == 1 })
	_, sb = e.ratedGame(a, b)
	e.resign(t, sb)
	eventually(t, 10*time.Second, "the second game to be rated", func() bool { return e.rating(a, "").GetGames() > 0 })
	time.Sleep(500 * time.Millisecond) // an abort counted late would show now
	if ra, rb := e.rating(a, ""), e.rating(b, ""); ra.GetGames() != 1 || rb.GetGames() != 1 || ra.GetRating() != 1220 || rb.GetRating() != 1180 ||
		ra.GetAborts() != 0 || rb.GetAborts() != 1 {
		t.Fatalf("after an abort and a win: %v / %v; want one game each, 1220 and 1180, and the abort counted against Leaves", ra, rb)
	}
	if seen := e.rating(a, b.id); seen.GetAborts() != 1 {
		t.Fatalf("Leaves seen by Stays: %v; want its abort shown", seen)
	}
	lb, err := e.mm[0].GetLeaderboard(a.ctx(), &matchmakingv1.GetLeaderboardRequest{Kind: janggi})
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range lb.GetEntries() {
		if r := en.GetRating(); r.GetPlayerId() == b.id && r.GetAborts() != 1 || r.GetPlayerId() == a.id && r.GetAborts() != 0 {
			t.Fatalf("leaderboard entry %v: want the aborts of GetRating", r)
		}
	}
}

// TestAbortsKeepAPlayerOutOfTheRatedQueue: a player who has aborted the
// most rated games of a kind allowed in an hour is refused a new ticket of
// that kind's rated queue until the oldest leaves the hour, saying when;
// a retry of an entry, and an entry while a ticket waits, are answered as
// before; the casual queue, the other kind and the opponent are not held
// back.
func TestAbortsKeepAPlayerOutOfTheRatedQueue(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.MaxAborts = 2 })
	a, b := e.account("4201", "Patient"), e.account("4202", "Picky")
	mm := e.mm[0]
	var waiting *matchmakingv1.Ticket
	for i := 1; i <= 2; i++ {
		_, sb := e.ratedGame(a, b)
		if i == 2 {
			// Picky queues again before leaving the game.
			waiting = e.enter(mm, b, &matchmakingv1.EnterQueueRequest{RequestId: "picky-1", Kind: janggi, Rated: true})
		}
		if _, err := e.game.Client.Abort(as(sb.GetToken()), &gamev1.AbortRequest{GameId: sb.GetGameId(), RequestId: rid()}); err != nil {
			t.Fatalf("Abort %d: %v", i, err)
		}
		eventually(t, 10*time.Second, "the abort to be counted", func() bool { return e.rating(b, "").GetAborts() == uint32(i) })
	}
	retry, err := mm.EnterQueue(b.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: "picky-1", Kind: janggi, Rated: true})
	if err != nil || retry.GetTicket().GetTicketId() != waiting.GetTicketId() {
		t.Fatalf("a retry of the waiting ticket's entry: %v %v, want its ticket", retry, err)
	}
	if _, err := mm.EnterQueue(b.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi, Rated: true}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("another entry while the ticket waits: %v, want AlreadyExists", err)
	}
	cancel := func(p player, tk *matchmakingv1.Ticket) {
		t.Helper()
		if _, err := mm.CancelTicket(p.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: tk.GetTicketId()}); err != nil {
			t.Fatal(err)
		}
	}
	cancel(b, waiting)
	_, err = mm.EnterQueue(b.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi, Rated: true})
	if status.Code(err) != codes.ResourceExhausted || apierr.ReasonOf(err) != "RATE_LIMITED" ||
		!regexp.MustCompile(`you aborted 2 rated games of Janggi in the last 1h0m0s, or let them abort without a first move: you may enter a rated Janggi queue again in (59m\d+s|1h0m0s)$`).MatchString(status.Convert(err).Message()) {
		t.Fatalf("Picky enters the rated queue: %v, want ResourceExhausted saying when", err)
	}
	// The first abort, moments ago, leaves the hour in a little under an hour.
	if w := retryAfter(err); w <= 59*time.Minute || w > time.Hour {
		t.Fatalf("retry after %v, want a little under an hour", w)
	}
	cancel(b, e.enter(mm, b, &matchmakingv1.EnterQueueRequest{Kind: janggi}))
	cancel(b, e.enter(mm, b, &matchmakingv1.EnterQueueRequest{Kind: xiangqi, Rated: true}))
	cancel(a, e.enter(mm, a, &matchmakingv1.EnterQueueRequest{Kind: janggi, Rated: true}))
	// Once the first abort leaves the hour, there is room.
	e.clock.Advance(61 * time.Minute)
	cancel(b, e.enter(mm, b, &matchmakingv1.EnterQueueRequest{Kind: janggi, Rated: true}))
}

// TestHistoryAndLeaderboardComeInPages: a client reads a long rating
// history with next_page_token and the leaderboard with offset, each
// change and each player once, and a token or offset that is not one is
// InvalidArgument.
func TestHistoryAndLeaderboardComeInPages(t *testing.T) {
	e := newEnv(t, 1, nil)
	a := e.account("6001", "Pager")
	st := store.New(e.game.Redis, e.cfg.KeyPrefix)
	const games = 12
	for i := range games {
		o := store.Player{ID: fmt.Sprintf("opp%d", i), Name: fmt.Sprintf("Opp %d", i)}
		out := store.Outcome{GameID: fmt.Sprintf("game%d", i), Kind: janggi, A: store.Player{ID: a.id, Name: a.name}, B: o, ScoreA: 1, At: time.Now()}
		if _, err := st.ApplyRating(context.Background(), out); err != nil {
			t.Fatal(err)
		}
	}

	var changes []string
	req := &matchmakingv1.GetRatingHistoryRequest{Kind: janggi, Limit: 5}
	for pages := 1; ; pages++ {
		h, err := e.mm[0].GetRatingHistory(a.ctx(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range h.GetChanges() {
			changes = append(changes, c.GetGameId())
		}
		if h.GetNextPageToken() == "" {
			if pages != 3 {
				t.Fatalf("%d pages of 5 for %d changes, want 3", pages, games)
			}
			break
		}
		req.PageToken = h.GetNextPageToken()
	}
	for i, g := range changes {
		if want := fmt.Sprintf("game%d", games-1-i); g != want || len(changes) != games {
			t.Fatalf("paged history %v: want game%d down to game0, each once", changes, games-1)
		}
	}
	for _, bad := range []string{"next", "h0", "h-3", "h99", "7", strings.Repeat("h", 5000)} {
		_, err := e.mm[0].GetRatingHistory(a.ctx(), &matchmakingv1.GetRatingHistoryRequest{Kind: janggi, PageToken: bad})
		wantCode(t, err, codes.InvalidArgument)
		if !strings.Contains(err.Error(), "page_token") || len(err.Error()) > 300 {
			t.Fatalf("page token %.20q: the message should name page_token, briefly: %v", bad, err)
		}
	}

	seen := map[string]bool{}
	lastRank := uint64(0)
	for offset := uint32(0); offset < games+1; offset += 5 {
		lb, err := e.mm[0].GetLeaderboard(a.ctx(), &matchmakingv1.GetLeaderboardRequest{Kind: janggi, Limit: 5, Offset: offset})
		if err != nil {
			t.Fatal(err)
		}
		if want := min(5, games+1-int(offset)); len(lb.GetEntries()) != want || lb.GetTotal() != games+1 {
			t.Fatalf("page at %d: %d entries of %d, want %d of %d", offset, len(lb.GetEntries()), lb.GetTotal(), want, games+1)
		}
		for _, en := range lb.GetEntries() {
			id := en.GetRating().GetPlayerId()
			if seen[id] || en.GetRank() < lastRank || en.GetRank() > uint64(offset)+5 {
				t.Fatalf("page at %d: %s ranked %d after rank %d (seen before: %v)", offset, id, en.GetRank(), lastRank, seen[id])
			}
			seen[id], lastRank = true, en.GetRank()
		}
	}
	if len(seen) != games+1 {
		t.Fatalf("the pages held %d players, want %d", len(seen), games+1)
	}
	_, err := e.mm[0].GetLeaderboard(a.ctx(), &matchmakingv1.GetLeaderboardRequest{Kind: janggi, Offset: 5, AroundPlayerId: "me"})
	wantCode(t, err, codes.InvalidArgument)
}

// TestARenameShowsOnTheLeaderboardAtOnce: a rated player who signs in
// under another nickname is listed under it on the leaderboard and in
// their rating before their next rated game; signing in rates nobody.
func TestARenameShowsOnTheLeaderboardAtOnce(t *testing.T) {
	e := newEnv(t, 1, nil)
	a := e.account("6101", "First Name")
	st := store.New(e.game.Redis, e.cfg.KeyPrefix)
	out := store.Outcome{GameID: "renamed-game", Kind: janggi, A: store.Player{ID: a.id, Name: a.name}, B: store.Player{ID: "opp", Name: "Opp"}, ScoreA: 1, At: time.Now()}
	if _, err := st.ApplyRating(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	r, err := e.mm[0].SignInWithGoogle(context.Background(), &matchmakingv1.SignInWithGoogleRequest{IdToken: e.issuer.token(t, "6101", "First Name", nil), Nickname: "Second Name"})
	if err != nil || r.GetPlayerId() != a.id {
		t.Fatalf("sign in again: %v %v", r, err)
	}
	opp := e.account("6102", "Onlooker")
	lb, err := e.mm[0].GetLeaderboard(opp.ctx(), &matchmakingv1.GetLeaderboardRequest{Kind: janggi})
	if err != nil || lb.GetEntries()[0].GetRating().GetPlayerId() != a.id {
		t.Fatalf("leaderboard %v %v", lb, err)
	}
	if got := lb.GetEntries()[0].GetRating().GetDisplayName(); got != "Second Name" {
		t.Fatalf("the leaderboard lists the renamed player as %q, want %q", got, "Second Name")
	}
	if got := e.rating(opp, a.id).GetDisplayName(); got != "Second Name" {
		t.Fatalf("their rating says %q, want %q", got, "Second Name")
	}
	// Signing in put nobody on a leaderboard.
	for _, k := range []commonv1.GameKind{janggi, xiangqi} {
		lb, err := e.mm[0].GetLeaderboard(opp.ctx(), &matchmakingv1.GetLeaderboardRequest{Kind: k})
		if want := map[commonv1.GameKind]uint64{janggi: 2, xiangqi: 0}[k]; err != nil || lb.GetTotal() != want {
			t.Fatalf("%v leaderboard after sign-ins: %v %v, want %d players", k, lb, err, want)
		}
	}
}

// TestSignInWithRedisDown: the leaderboards cannot learn a new name while
// Redis is down; the sign-in still succeeds, and the log says why.
func TestSignInWithRedisDown(t *testing.T) {
	own := redistest.Own(t)
	e := newEnvOn(t, own.Addr, nil, 1, nil)
	own.Kill()
	r, err := e.mm[0].SignInWithGoogle(context.Background(), &matchmakingv1.SignInWithGoogleRequest{IdToken: e.issuer.token(t, "6201", "Someone", nil), Nickname: "New Name"})
	if err != nil || r.GetDisplayName() != "New Name" {
		t.Fatalf("sign in with Redis down: %v %v", r, err)
	}
	if !strings.Contains(e.logs.String(), "renamed player") {
		t.Fatalf("no warning of the name not shown on the leaderboards: %s", e.logs.String())
	}
}

// rateAll rates the games between a and each of the opponents, one by one,
// a scoring score in each.
func rateAll(t *testing.T, st *store.Store, kind commonv1.GameKind, game string, a store.Player, opponents string, n int, score float64) {
	t.Helper()
	for i := range n {
		if _, err := st.ApplyRating(context.Background(), store.Outcome{GameID: fmt.Sprintf("%s%d", game, i), Kind: kind, A: a,
			B: store.Player{ID: fmt.Sprintf("%s%d", opponents, i), Name: "O"}, ScoreA: score, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAHistoryPageTokenIsOnlyOneAPageGave: GetRatingHistory takes as
// page_token only a next_page_token that a page of this player's history
// of this kind gave: not a place no page starts at (the first change, past
// the latest), not a number written otherwise, not a token of the player's
// other kind or of another player's history (which would read that
// history from the place, as if it were this one).
func TestAHistoryPageTokenIsOnlyOneAPageGave(t *testing.T) {
	e := newEnv(t, 1, nil)
	a, b := e.account("r9011", "Both"), e.account("r9012", "Other")
	st := store.New(e.game.Redis, e.cfg.KeyPrefix)
	rateAll(t, st, janggi, "j", store.Player{ID: a.id, Name: a.name}, "o", 12, 1)
	rateAll(t, st, xiangqi, "x", store.Player{ID: a.id, Name: a.name}, "p", 20, 1)
	rateAll(t, st, janggi, "bj", store.Player{ID: b.id, Name: b.name}, "q", 20, 0)
	// Every token a page of a's Janggi history can give.
	given := map[string]bool{}
	for limit := uint32(1); limit <= 12; limit++ {
		req := &matchmakingv1.GetRatingHistoryRequest{Kind: janggi, Limit: limit}
		for {
			h, err := e.mm[0].GetRatingHistory(a.ctx(), req)
			if err != nil {
				t.Fatal(err)
			}
			if h.GetNextPageToken() == "" {
				break
			}
			given[h.GetNextPageToken()] = true
			req.PageToken = h.GetNextPageToken()
		}
	}
	var tok string
	for tok = range given {
		break
	}
	_, mark, _ := strings.Cut(tok, ".")
	refuse := func(who context.Context, kind commonv1.GameKind, player, token string) {
		t.Helper()
		h, err := e.mm[0].GetRatingHistory(who, &matchmakingv1.GetRatingHistoryRequest{Kind: kind, PlayerId: player, PageToken: token})
		if status.Code(err) != codes.InvalidArgument {
			var ids []string
			for _, c := range h.GetChanges() {
				ids = append(ids, c.GetGameId())
			}
			t.Errorf("page_token %q (%v, player %q) read %v, %v; want InvalidArgument", token, kind, player, ids, err)
		}
	}
	for _, n := range []string{"1", "13", "+5", "05", "1_0"} {
		if forged := "h" + n + "." + mark; !given[forged] {
			refuse(a.ctx(), janggi, "", forged)
		}
	}
	refuse(a.ctx(), xiangqi, "", tok)
	refuse(a.ctx(), janggi, b.id, tok)
}

// TestAHistoryTokenOfTheReleaseBeforeIsStillRead: a client that paged a
// player's rating history on a replica of the previous release (a rolling
// deployment, or an app open across the upgrade) holds the token that
// release gave, "h<number>", which names no history: its next page is
// still read.
func TestAHistoryTokenOfTheReleaseBeforeIsStillRead(t *testing.T) {
	e := newEnv(t, 1, nil)
	a := e.account("r9911", "Pager")
	st := store.New(e.game.Redis, e.cfg.KeyPrefix)
	rateAll(t, st, janggi, "rv", store.Player{ID: a.id, Name: a.name}, "rvo", 12, 1)
	first, err := e.mm[0].GetRatingHistory(a.ctx(), &matchmakingv1.GetRatingHistoryRequest{Kind: janggi, Limit: 7})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("this release's token after 7 of 12 changes: %q", first.GetNextPageToken())
	// What the previous release wrote for the same page.
	const old = "h6"
	next, err := e.mm[0].GetRatingHistory(a.ctx(), &matchmakingv1.GetRatingHistoryRequest{Kind: janggi, Limit: 7, PageToken: old})
	if err != nil {
		t.Fatalf("the next_page_token %q the release before gave for this player's history after 7 of 12 changes: %v", old, err)
	}
	if len(next.GetChanges()) != 5 {
		t.Fatalf("the page after %q has %d changes, want the 5 older ones", old, len(next.GetChanges()))
	}
}
