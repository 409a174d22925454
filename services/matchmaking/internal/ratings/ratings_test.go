package ratings

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/grpc/metadata"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game/gametest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

var reqSeq atomic.Int64

func rid() string { return fmt.Sprintf("r%d-%d", time.Now().UnixNano(), reqSeq.Add(1)) }

type fixture struct {
	env   *gametest.Env
	store *store.Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return &fixture{env: gametest.Start(t, nil), store: store.New(redistest.Client(t), redistest.Prefix(t))}
}

func (f *fixture) consumer(t *testing.T, cfg Config) *Consumer {
	t.Helper()
	c, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), f.store, f.env.Client, noop.NewMeterProvider().Meter("test"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ratedGame creates a rated game between p1 (first) and p2 (second) and
// records it as pending, as matchmaking does.
func (f *fixture) ratedGame(t *testing.T, p1, p2 string, public bool) (store.Pending, map[commonv1.Side]string) {
	t.Helper()
	p, tokens := f.unrecordedRatedGame(t, p1, p2, public)
	if err := f.store.AddPending(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p, tokens
}

// unrecordedRatedGame is ratedGame, without recording the game.
func (f *fixture) unrecordedRatedGame(t *testing.T, p1, p2 string, public bool) (store.Pending, map[commonv1.Side]string) {
	t.Helper()
	resp, err := f.env.Client.CreateGame(context.Background(), &gamev1.CreateGameRequest{
		RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Rated: true, Public: public,
		Seats: []*gamev1.Seat{
			{Side: commonv1.Side_SIDE_FIRST, PlayerId: p1, DisplayName: p1},
			{Side: commonv1.Side_SIDE_SECOND, PlayerId: p2, DisplayName: p2},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[commonv1.Side]string{}
	for _, c := range resp.GetCredentials() {
		tokens[c.GetSide()] = c.GetToken()
	}
	return store.Pending{Game: resp.GetGameId(), Kind: int32(commonv1.GameKind_GAME_KIND_XIANGQI), First: p1, FName: p1, Second: p2, SName: p2, Token: tokens[commonv1.Side_SIDE_FIRST]}, tokens
}

func (f *fixture) resign(t *testing.T, game, token string) *gamev1.Game {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
	r, err := f.env.Client.Resign(ctx, &gamev1.ResignRequest{GameId: game, RequestId: rid()})
	if err != nil {
		t.Fatal(err)
	}
	return r.GetGame()
}

func (f *fixture) rating(t *testing.T, p string) store.Rating {
	t.Helper()
	r, err := f.store.PlayerRating(context.Background(), commonv1.GameKind_GAME_KIND_XIANGQI, p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) pending(t *testing.T, id string) bool {
	t.Helper()
	ok, err := f.store.IsPending(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func run(t *testing.T, c *Consumer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestEndingDeliveredTwiceAppliesOnce: the consumer sees the game end and
// rates it; the same GameEnded is then delivered twice more: nothing
// changes.
func TestEndingDeliveredTwiceAppliesOnce(t *testing.T) {
	f := newFixture(t)
	c := f.consumer(t, Config{ClaimEvery: 50 * time.Millisecond, Lease: time.Second})
	run(t, c)
	p, tok := f.ratedGame(t, "alice", "bob", true)
	g := f.resign(t, p.Game, tok[commonv1.Side_SIDE_SECOND])
	eventually(t, "the rating", func() bool { return !f.pending(t, p.Game) })
	if a, b := f.rating(t, "alice"), f.rating(t, "bob"); a.Rating != 1220 || b.Rating != 1180 || a.Games != 1 {
		t.Fatalf("after the game: %+v %+v", a, b)
	}
	for range 2 {
		if err := c.Settle(context.Background(), p, g.GetResult(), g.GetEndedBy(), g.GetEndedAt().AsTime()); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := f.rating(t, "alice"), f.rating(t, "bob"); a.Rating != 1220 || b.Rating != 1180 || a.Games != 1 || b.Games != 1 {
		t.Fatalf("after duplicate deliveries: %+v %+v", a, b)
	}
	h, err := f.store.History(context.Background(), commonv1.GameKind_GAME_KIND_XIANGQI, "alice", 0, 10)
	if err != nil || len(h.Changes) != 1 {
		t.Fatalf("history %+v %v: want one change", h, err)
	}
}

// TestTwoFollowersOfOneGame: two consumers follow the same game at once
// (as two replicas do when a lease changes hands) and both see the end.
func TestTwoFollowersOfOneGame(t *testing.T) {
	f := newFixture(t)
	c1 := f.consumer(t, Config{})
	c2 := f.consumer(t, Config{})
	p, tok := f.ratedGame(t, "carol", "dave", true)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, c := range []*Consumer{c1, c2} {
		wg.Add(1)
		go func() { defer wg.Done(); var reached resumePoint; errs <- c.follow(context.Background(), p, &reached) }()
	}
	time.Sleep(200 * time.Millisecond) // both streams are open
	f.resign(t, p.Game, tok[commonv1.Side_SIDE_FIRST])
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if c, d := f.rating(t, "carol"), f.rating(t, "dave"); c.Rating != 1180 || d.Rating != 1220 || c.Games != 1 || d.Games != 1 {
		t.Fatalf("carol %+v dave %+v", c, d)
	}
}

func TestAbortedGameIsNotRated(t *testing.T) {
	f := newFixture(t)
	c := f.consumer(t, Config{})
	p, _ := f.ratedGame(t, "erin", "frank", true)
	res := &commonv1.Result{Winner: commonv1.Winner_WINNER_UNSPECIFIED, Method: commonv1.EndMethod_END_METHOD_ABORTED}
	// Delivered twice, as a lease changing hands may: counted once, against
	// frank, who aborted (Black).
	for range 2 {
		if err := c.Settle(context.Background(), p, res, commonv1.Side_SIDE_SECOND, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if f.pending(t, p.Game) {
		t.Fatal("an aborted game is still pending")
	}
	if e := f.rating(t, "erin"); e.Games != 0 || e.Rating != 1200 || e.Aborts != 0 {
		t.Fatalf("aborted game changed %+v", e)
	}
	if fr := f.rating(t, "frank"); fr.Games != 0 || fr.Rating != 1200 || fr.Aborts != 1 {
		t.Fatalf("the aborting player after the abort: %+v; want one abort, no game", fr)
	}
}

// TestPrivateGameIsPolled: a private game's events are for its seats, so
// its end is polled for, with matchmaking's service credential: the seat
// credential recorded with it may have run out, or its key been removed,
// long before the game ends.
func TestPrivateGameIsPolled(t *testing.T) {
	f := newFixture(t)
	c := f.consumer(t, Config{ClaimEvery: 50 * time.Millisecond, PollEvery: 50 * time.Millisecond})
	run(t, c)
	p, tok := f.unrecordedRatedGame(t, "gina", "hugo", false)
	p.Token = "k1.no-longer-good"
	if err := f.store.AddPending(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	f.resign(t, p.Game, tok[commonv1.Side_SIDE_FIRST])
	eventually(t, "the private game's rating", func() bool { return f.rating(t, "hugo").Games == 1 })
	if h := f.rating(t, "hugo"); h.Rating != 1220 {
		t.Fatalf("hugo %+v", h)
	}
}

func TestVanishedGameIsDropped(t *testing.T) {
	f := newFixture(t)
	c := f.consumer(t, Config{ClaimEvery: 50 * time.Millisecond})
	run(t, c)
	p := store.Pending{Game: "nosuchgame", Kind: int32(commonv1.GameKind_GAME_KIND_JANGGI), First: "a", Second: "b"}
	if err := f.store.AddPending(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the vanished game to be dropped", func() bool { return !f.pending(t, p.Game) })
}

// TestAGameNoLongerPendingCountsNothing: the end of a game no longer
// pending (settled already, or made for a match given up, whose players
// never knew of it) rates nobody and counts no abort.
func TestAGameNoLongerPendingCountsNothing(t *testing.T) {
	f := newFixture(t)
	c := f.consumer(t, Config{})
	p, _ := f.ratedGame(t, "ivy", "jon", true)
	if err := f.store.RemovePending(context.Background(), p.Game); err != nil {
		t.Fatal(err)
	}
	for _, res := range []*commonv1.Result{{Method: commonv1.EndMethod_END_METHOD_ABORTED}, {Winner: commonv1.Winner_WINNER_FIRST, Method: commonv1.EndMethod_END_METHOD_RESIGNATION}} {
		if err := c.Settle(context.Background(), p, res, commonv1.Side_SIDE_FIRST, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if ivy := f.rating(t, "ivy"); ivy.Aborts != 0 || ivy.Games != 0 || ivy.Rating != 1200 {
		t.Fatalf("ivy after the end of a game no longer pending: %+v; want nothing counted", ivy)
	}
}

// TestAChangeIsDatedByTheGamesEnd: a game that ended while no matchmaker
// ran is rated later; its change in the players' histories is dated when
// the game ended, as an app shows it next to the game, not when it was
// rated.
func TestAChangeIsDatedByTheGamesEnd(t *testing.T) {
	f := newFixture(t)
	c := f.consumer(t, Config{})
	p, _ := f.ratedGame(t, "kim", "lee", true)
	ended := time.Now().Add(-3 * time.Hour).Truncate(time.Millisecond)
	res := &commonv1.Result{Winner: commonv1.Winner_WINNER_DRAW, Method: commonv1.EndMethod_END_METHOD_AGREEMENT}
	if err := c.Settle(context.Background(), p, res, commonv1.Side_SIDE_UNSPECIFIED, ended); err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"kim", "lee"} {
		h, err := f.store.History(context.Background(), commonv1.GameKind_GAME_KIND_XIANGQI, who, 0, 10)
		if err != nil || len(h.Changes) != 1 {
			t.Fatalf("%s's history %+v %v: want one change", who, h, err)
		}
		if got := time.UnixMilli(h.Changes[0].AtMs); !got.Equal(ended) {
			t.Errorf("%s's change is dated %v, want the game's end %v", who, got, ended)
		}
	}
	// An end of unknown time (the zero time) is dated when rated.
	p, _ = f.ratedGame(t, "kim", "lee", true)
	before := time.Now().Add(-time.Second)
	if err := c.Settle(context.Background(), p, res, commonv1.Side_SIDE_UNSPECIFIED, time.Time{}); err != nil {
		t.Fatal(err)
	}
	h, err := f.store.History(context.Background(), commonv1.GameKind_GAME_KIND_XIANGQI, "kim", 0, 1)
	if err != nil || len(h.Changes) != 1 || time.UnixMilli(h.Changes[0].AtMs).Before(before) {
		t.Fatalf("a change of unknown time: %+v %v, want it dated now", h, err)
	}
}

// TestEachResultScoresItsPlayers: a win of either side and a draw each
// move both players' ratings as Elo scores them (K 40 for a first game
// between equals).
func TestEachResultScoresItsPlayers(t *testing.T) {
	f := newFixture(t)
	c := f.consumer(t, Config{})
	for _, tt := range []struct {
		first, second         string
		winner                commonv1.Winner
		wantFirst, wantSecond int
	}{
		{"ann", "ben", commonv1.Winner_WINNER_FIRST, 1220, 1180},
		{"cat", "dan", commonv1.Winner_WINNER_SECOND, 1180, 1220},
		{"eve", "fay", commonv1.Winner_WINNER_DRAW, 1200, 1200},
	} {
		p, _ := f.ratedGame(t, tt.first, tt.second, true)
		res := &commonv1.Result{Winner: tt.winner, Method: commonv1.EndMethod_END_METHOD_AGREEMENT}
		if tt.winner != commonv1.Winner_WINNER_DRAW {
			res.Method = commonv1.EndMethod_END_METHOD_RESIGNATION
		}
		if err := c.Settle(context.Background(), p, res, commonv1.Side_SIDE_UNSPECIFIED, time.Time{}); err != nil {
			t.Fatal(err)
		}
		a, b := f.rating(t, tt.first), f.rating(t, tt.second)
		if a.Rating != tt.wantFirst || b.Rating != tt.wantSecond || a.Games != 1 || b.Games != 1 {
			t.Errorf("%v: %+v and %+v, want %d and %d after one game", tt.winner, a, b, tt.wantFirst, tt.wantSecond)
		}
	}
}

// TestAnAbortCountsAgainstTheSideThatAborted: the abort of a rated game is
// counted against the player of the side that aborted it, first or second.
func TestAnAbortCountsAgainstTheSideThatAborted(t *testing.T) {
	f := newFixture(t)
	c := f.consumer(t, Config{})
	res := &commonv1.Result{Method: commonv1.EndMethod_END_METHOD_ABORTED}
	for _, tt := range []struct {
		first, second string
		by            commonv1.Side
		aborter       string
	}{
		{"gus", "hil", commonv1.Side_SIDE_FIRST, "gus"},
		{"ike", "jan", commonv1.Side_SIDE_SECOND, "jan"},
	} {
		p, _ := f.ratedGame(t, tt.first, tt.second, true)
		if err := c.Settle(context.Background(), p, res, tt.by, time.Time{}); err != nil {
			t.Fatal(err)
		}
		for _, who := range []string{tt.first, tt.second} {
			want := 0
			if who == tt.aborter {
				want = 1
			}
			if r := f.rating(t, who); r.Aborts != want || r.Games != 0 {
				t.Errorf("aborted by %v: %s has %+v, want %d aborts and no game", tt.by, who, r, want)
			}
		}
	}
}

// failNextCommand fails the first Redis command sent once it is armed.
type failNextCommand struct{ armed, failed atomic.Bool }

func (f *failNextCommand) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *failNextCommand) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.armed.CompareAndSwap(true, false) {
			f.failed.Store(true)
			return errors.New("redis: connection reset")
		}
		return next(ctx, cmd)
	}
}
func (f *failNextCommand) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAnEndingThatFailedToSettleIsSettledWhenFollowedAgain: the game's
// end arrives, but applying it fails (Redis answers an error); the game is
// followed again after the version its stream had reached, and that must
// not pass over its end: the game is rated then, not never.
func TestAnEndingThatFailedToSettleIsSettledWhenFollowedAgain(t *testing.T) {
	rdb := redistest.Client(t)
	fail := new(failNextCommand)
	rdb.AddHook(fail)
	f := &fixture{env: gametest.Start(t, nil), store: store.New(rdb, redistest.Prefix(t))}
	c := f.consumer(t, Config{RetryAfter: 10 * time.Millisecond})
	p, tok := f.ratedGame(t, "erin", "finn", true)
	f.resign(t, p.Game, tok[commonv1.Side_SIDE_SECOND])
	fail.armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c.watch(ctx, p) // returns once the game is settled, or at ctx's end
	if !fail.failed.Load() {
		t.Fatal("no Redis command failed")
	}
	if f.pending(t, p.Game) {
		t.Fatal("the game is still pending 3 s after applying its end failed once; want it rated when followed again")
	}
	if a := f.rating(t, "erin"); a.Games != 1 {
		t.Fatalf("erin after the game: %+v, want it rated", a)
	}
}
