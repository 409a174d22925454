package clock_test

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/apptest"
	"github.com/palacehq/palace/pkg/deadline"
	clockv1 "github.com/palacehq/palace/pkg/gen/palace/clock/v1"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/clock"
	"github.com/palacehq/palace/services/game/gametest"
)

// Two first moves of Xiangqi, after which the clock starts with the
// first side to move, and replies that keep the game going.
var (
	firstMoves = []string{"h3e3", "h10g8"}
	thirdMove  = "h1g3"
)

// TestTimeoutWithNoClientConnected: nobody streams or moves; the clock
// service alone ends the game on time, never before the deadline.
func TestTimeoutWithNoClientConnected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		lagOff     bool
		control    *commonv1.TimeControl
		moves      []string
		wantWinner commonv1.Winner
		wantSide   commonv1.Side
	}{
		{name: "fischer with the default lag grace", control: fischer(time.Second), moves: firstMoves,
			wantWinner: commonv1.Winner_WINNER_SECOND, wantSide: commonv1.Side_SIDE_FIRST},
		{name: "byo-yomi without lag compensation", lagOff: true, control: byoyomi(time.Second, 1, time.Second), moves: firstMoves,
			wantWinner: commonv1.Winner_WINNER_SECOND, wantSide: commonv1.Side_SIDE_FIRST},
		{name: "second side flags after a move", lagOff: true, control: fischer(time.Second), moves: append(append([]string{}, firstMoves...), thirdMove),
			wantWinner: commonv1.Winner_WINNER_FIRST, wantSide: commonv1.Side_SIDE_SECOND},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := startGame(t, tt.lagOff)
			startClock(t, env, "")
			tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: tt.control})
			dl := deadlineOf(t, tb.play(t, tt.moves...))
			g := tb.waitEnded(t)
			if r := g.GetResult(); r.GetMethod() != commonv1.EndMethod_END_METHOD_TIMEOUT || r.GetWinner() != tt.wantWinner {
				t.Fatalf("result %v, want %v on time", r, tt.wantWinner)
			}
			ended := g.GetEndedAt().AsTime()
			if !ended.After(dl) {
				t.Fatalf("ended at %v, not after the deadline %v", ended, dl)
			}
			t.Logf("flagged %v after the flag instant", ended.Sub(dl.Add(time.Millisecond)))
			evs := tb.events(t)
			if n := gameEnds(evs); n != 1 {
				t.Fatalf("%d GameEnded events, want 1", n)
			}
			if side := evs[len(evs)-1].GetGameEnded().GetSide(); side != tt.wantSide {
				t.Fatalf("flagged side %v, want %v", side, tt.wantSide)
			}
		})
	}
}

// TestByoYomiEventsInStream: entering byo-yomi and each period used reach
// a client's stream with the clocks, then the flag, in order.
func TestByoYomiEventsInStream(t *testing.T) {
	t.Parallel()
	env := startGame(t, true)
	startClock(t, env, "")
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true, TimeControl: byoyomi(time.Second, 3, time.Second)})
	g := tb.play(t, firstMoves...)
	// Clock instants are whole milliseconds.
	start := time.UnixMilli(g.GetClocks().GetAsOf().AsTime().UnixMilli())
	ctx, cancel := context.WithTimeout(context.Background(), endWithin)
	defer cancel()
	// No credential: a spectator, so the stream itself is no event.
	st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: g.GetVersion()})
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		kind    string
		at      time.Time
		periods uint32
		delay   time.Duration
	}
	var seen []got
	for len(seen) == 0 || seen[len(seen)-1].kind != "ended" {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("stream: %v (after %v)", err, seen)
		}
		e := m.GetEvent()
		if e == nil {
			continue
		}
		delay := time.Since(e.GetTime().AsTime())
		switch {
		case e.GetClock() != nil:
			c := e.GetClock()
			if c.GetClocks() == nil || c.GetSide() != commonv1.Side_SIDE_FIRST {
				t.Fatalf("clock event without clocks or for the wrong side: %v", c)
			}
			seen = append(seen, got{kind: c.GetKind().String(), at: e.GetTime().AsTime(), periods: c.GetClocks().GetFirst().GetPeriodsLeft(), delay: delay})
		case e.GetGameEnded() != nil:
			seen = append(seen, got{kind: "ended", at: e.GetTime().AsTime(), delay: delay})
		}
	}
	want := []struct {
		kind    string
		after   time.Duration
		periods uint32
	}{
		{"CLOCK_EVENT_KIND_BYO_YOMI_ENTERED", time.Second, 3},
		{"CLOCK_EVENT_KIND_PERIOD_USED", 2*time.Second + time.Millisecond, 2},
		{"CLOCK_EVENT_KIND_PERIOD_USED", 3*time.Second + time.Millisecond, 1},
		{"ended", 4*time.Second + time.Millisecond, 0},
	}
	if len(seen) != len(want) {
		t.Fatalf("events %+v, want %d", seen, len(want))
	}
	for i, w := range want {
		s := seen[i]
		if s.kind != w.kind || s.periods != w.periods {
			t.Fatalf("event %d: %s with %d periods, want %s with %d", i, s.kind, s.periods, w.kind, w.periods)
		}
		if w.kind != "ended" && !s.at.Equal(start.Add(w.after)) {
			t.Fatalf("event %d at %v, want the milestone %v", i, s.at, start.Add(w.after))
		}
		// Generous: the 100 ms target is measured under load by the
		// load test; this only catches a sweeper that does not run.
		if s.delay > 5*time.Second {
			t.Fatalf("event %d reached the stream %v after its instant", i, s.delay)
		}
		t.Logf("%s reached the stream %v after its instant", s.kind, s.delay)
	}
}

// TestSetupAndFirstMoveDeadlines: the sweeper delivers the other
// deadlines too: default Janggi formations and aborts.
func TestSetupAndFirstMoveDeadlines(t *testing.T) {
	t.Parallel()
	env := startGame(t, false)
	startClock(t, env, "")
	tests := []struct {
		name  string
		req   *gamev1.CreateGameRequest
		moves []string
		check func(t *testing.T, tb *table)
	}{
		{
			name: "janggi formations default in turn",
			req:  &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_JANGGI, SetupTime: durationpb.New(time.Second), TimeControl: byoyomi(time.Minute, 3, 30*time.Second)},
			check: func(t *testing.T, tb *table) {
				g := tb.waitFor(t, "started", func(g *gamev1.Game) bool { return g.GetStatus() != commonv1.GameStatus_GAME_STATUS_SETUP })
				ma := commonv1.Formation_FORMATION_MA_SANG_SANG_MA
				if g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING || g.GetFirstFormation() != ma || g.GetSecondFormation() != ma {
					t.Fatalf("after setup: %v, formations %v/%v", g.GetStatus(), g.GetFirstFormation(), g.GetSecondFormation())
				}
				var defaults []commonv1.Side
				for _, e := range tb.events(t) {
					if fc := e.GetFormationChosen(); fc != nil && fc.GetByDefault() {
						defaults = append(defaults, fc.GetSide())
					}
				}
				if len(defaults) != 2 || defaults[0] != commonv1.Side_SIDE_SECOND || defaults[1] != commonv1.Side_SIDE_FIRST {
					t.Fatalf("default formations for %v, want Han then Cho", defaults)
				}
			},
		},
		{
			name: "no first move aborts",
			req:  &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, FirstMoveTime: durationpb.New(time.Second), TimeControl: byoyomi(time.Minute, 3, 30*time.Second)},
			check: func(t *testing.T, tb *table) {
				wantAbort(t, tb, commonv1.Side_SIDE_FIRST)
			},
		},
		{
			name:  "no reply to the first move aborts",
			req:   &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, FirstMoveTime: durationpb.New(time.Second), TimeControl: fischer(time.Minute)},
			moves: firstMoves[:1],
			check: func(t *testing.T, tb *table) {
				wantAbort(t, tb, commonv1.Side_SIDE_SECOND)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tb := create(t, env, tt.req)
			tb.play(t, tt.moves...)
			tt.check(t, tb)
		})
	}
}

func wantAbort(t *testing.T, tb *table, absent commonv1.Side) {
	t.Helper()
	g := tb.waitEnded(t)
	if g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ABORTED || g.GetResult().GetMethod() != commonv1.EndMethod_END_METHOD_ABORTED {
		t.Fatalf("%v by %v, want aborted", g.GetStatus(), g.GetResult().GetMethod())
	}
	evs := tb.events(t)
	if n := gameEnds(evs); n != 1 || evs[len(evs)-1].GetGameEnded().GetSide() != absent {
		t.Fatalf("%d endings, last %v; want one, caused by %v", n, evs[len(evs)-1], absent)
	}
}

// TestTwoReplicasFlagEachGameOnce: two replicas share the shards and
// every game is flagged exactly once: one GameEnded per game, and the
// replicas' flag counts add up to the number of games.
func TestTwoReplicasFlagEachGameOnce(t *testing.T) {
	t.Parallel()
	env := startGame(t, true)
	a := startClock(t, env, "replica-a")
	b := startClock(t, env, "replica-b")
	waitOwners(t, a, "replica-a", "replica-b")
	n := 48
	if testing.Short() {
		n = 16
	}
	tables := make([]*table, n)
	var wg sync.WaitGroup
	for i := range tables {
		wg.Go(func() {
			tables[i] = create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer(time.Second + time.Duration(i)*20*time.Millisecond)})
			tables[i].play(t, firstMoves...)
		})
	}
	wg.Wait()
	for _, tb := range tables {
		g := tb.waitEnded(t)
		if g.GetResult().GetMethod() != commonv1.EndMethod_END_METHOD_TIMEOUT {
			t.Fatalf("game %s ended by %v", tb.id, g.GetResult().GetMethod())
		}
		if k := gameEnds(tb.events(t)); k != 1 {
			t.Fatalf("game %s has %d GameEnded events", tb.id, k)
		}
	}
	var flags uint64
	for _, c := range []clockv1.ClockServiceClient{a, b} {
		st, err := c.GetStats(context.Background(), &clockv1.GetStatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, bk := range st.GetLateness() {
			flags += bk.GetCount()
		}
	}
	if flags != uint64(n) {
		t.Fatalf("the replicas flagged %d times for %d games", flags, n)
	}
}

// waitOwners waits until the shards are held by exactly the given
// replicas.
func waitOwners(t *testing.T, c clockv1.ClockServiceClient, ids ...string) *clockv1.GetStatsResponse {
	t.Helper()
	stop := time.Now().Add(endWithin)
	for {
		st, err := c.GetStats(context.Background(), &clockv1.GetStatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		owners := map[string]int{}
		for _, s := range st.GetShards() {
			owners[s.GetOwner()]++
		}
		ok := len(owners) == len(ids)
		for _, id := range ids {
			ok = ok && owners[id] > 0
		}
		if ok {
			return st
		}
		if time.Now().After(stop) {
			t.Fatalf("shard owners %v, want %v", owners, ids)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMoveRacingItsDeadline sends moves around the last in-time instant
// while the sweeper flags at the next millisecond: every race resolves
// exactly once. Either the move is in time and the game goes on (the
// other side flags later), or the game ended on time and the move is
// refused; never both, never neither.
func TestMoveRacingItsDeadline(t *testing.T) {
	t.Parallel()
	races := 100
	if testing.Short() {
		races = 30
	}
	tests := []struct {
		name   string
		lagOff bool
		// lag is reported with the racing move; with the default policy
		// the largest report earns the whole grace, so the move is in
		// time up to the same deadline the sweeper flags after.
		lag time.Duration
	}{
		{name: "no lag compensation", lagOff: true},
		{name: "lag grace used up by the move", lag: 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := startGame(t, tt.lagOff)
			startClock(t, env, "")
			var mu sync.Mutex
			var inTime, late int
			var wg sync.WaitGroup
			for i := range races {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(i), 99))
					tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer(time.Second)})
					dl := deadlineOf(t, tb.play(t, firstMoves...))
					// From 40 ms before the deadline to 20 ms after it.
					time.Sleep(time.Until(dl.Add(time.Duration(rng.IntN(60)-40) * time.Millisecond)))
					resp, err := tb.tryMove(commonv1.Side_SIDE_FIRST, thirdMove, tt.lag)
					accepted := err == nil
					if !accepted {
						wantCode(t, err, codes.FailedPrecondition)
					}
					g := tb.waitEnded(t)
					ends := tb.events(t)
					if k := gameEnds(ends); k != 1 {
						t.Errorf("game %s: %d GameEnded events", tb.id, k)
						return
					}
					flagged := ends[len(ends)-1].GetGameEnded().GetSide()
					ended := g.GetEndedAt().AsTime()
					switch {
					case accepted && flagged == commonv1.Side_SIDE_FIRST:
						t.Errorf("game %s: the move was accepted and its side flagged (both)", tb.id)
					case accepted && resp.GetMove().GetPlayedAt().AsTime().After(dl):
						t.Errorf("game %s: accepted a move at %v after the deadline %v", tb.id, resp.GetMove().GetPlayedAt().AsTime(), dl)
					case !accepted && flagged != commonv1.Side_SIDE_FIRST:
						t.Errorf("game %s: the move was refused but the game went on (neither)", tb.id)
					case !accepted && !ended.After(dl):
						t.Errorf("game %s: flagged at %v, not after the deadline %v", tb.id, ended, dl)
					}
					mu.Lock()
					if accepted {
						inTime++
					} else {
						late++
					}
					mu.Unlock()
				})
			}
			wg.Wait()
			t.Logf("%d races: %d moves in time, %d too late", races, inTime, late)
		})
	}
}

// TestStaleEntriesNeverFlag puts entries into the index that are not any
// game's current deadline; the sweeper removes them without changing a
// game.
func TestStaleEntriesNeverFlag(t *testing.T) {
	t.Parallel()
	env := startGame(t, false)
	// Entries that are not current are re-checked for this long before
	// they are removed (see TestDeadlineDueWhenIndexedIsNotLost).
	c := startClockWith(t, env, "", func(c *clock.Config) { c.StaleAfter = 500 * time.Millisecond })
	ctx := context.Background()
	idx, err := deadline.New(env.Redis, env.Config.KeyPrefix, env.Config.DeadlineShards)
	if err != nil {
		t.Fatal(err)
	}
	running := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer(5 * time.Minute)})
	before := running.play(t, firstMoves...)
	resigned := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer(5 * time.Minute)})
	resigned.play(t, firstMoves...)
	if _, err := env.Client.Resign(resigned.as(commonv1.Side_SIDE_FIRST), &gamev1.ResignRequest{GameId: resigned.id, RequestId: rid()}); err != nil {
		t.Fatal(err)
	}
	resignedV := resigned.get(t).GetVersion()
	now := time.Now()
	stale := []deadline.Entry{
		{GameID: running.id, At: now.Add(-time.Second)},
		{GameID: running.id, At: now.Add(-5 * time.Millisecond)},
		{GameID: running.id, At: now.Add(300 * time.Millisecond)}, // becomes due while the test waits
		{GameID: resigned.id, At: now.Add(-time.Millisecond)},
		{GameID: "nosuchgame", At: now.Add(-time.Millisecond)},
	}
	for _, e := range stale {
		if err := idx.Add(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// Malformed members nobody can handle must not clog their shard.
	for _, m := range []string{"garbage", "game|notanumber"} {
		if err := env.Redis.ZAdd(ctx, idx.Key(0), redisZ(now, m)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	stop := time.Now().Add(endWithin)
	for left := -1; left != 0; {
		left = 0
		for _, e := range stale {
			if _, err := env.Redis.ZScore(ctx, idx.Key(idx.ShardOf(e.GameID)), e.GameID+"|"+itoa(e.At.UnixMilli())).Result(); err == nil {
				left++
			}
		}
		if n, _ := env.Redis.ZCount(ctx, idx.Key(0), "-inf", itoa(now.UnixMilli())).Result(); n > 0 {
			left++
		}
		if time.Now().After(stop) {
			t.Fatalf("%d stale entries are still in the index", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if g := running.get(t); g.GetVersion() != before.GetVersion() || g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		t.Fatalf("a stale entry changed the running game: version %d -> %d, %v", before.GetVersion(), g.GetVersion(), g.GetStatus())
	}
	if g := resigned.get(t); g.GetVersion() != resignedV || g.GetResult().GetMethod() != commonv1.EndMethod_END_METHOD_RESIGNATION {
		t.Fatalf("a stale entry changed the resigned game: %v at version %d", g.GetResult(), g.GetVersion())
	}
	// The running game's own deadline is still indexed.
	real := before.GetClocks().GetDeadline().AsTime().Add(time.Millisecond)
	if _, err := env.Redis.ZScore(ctx, idx.Key(idx.ShardOf(running.id)), running.id+"|"+itoa(real.UnixMilli())).Result(); err != nil {
		t.Fatalf("the current deadline entry is gone: %v", err)
	}
	st, err := c.GetStats(ctx, &clockv1.GetStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var removed uint64
	for _, s := range st.GetSweepers() {
		removed += s.GetStale()
	}
	if removed < uint64(len(stale)+2) {
		t.Fatalf("stats count %d stale entries, want at least %d", removed, len(stale)+2)
	}
}

// TestDeadlineDueWhenIndexedIsNotLost: the game service indexes a
// deadline before the commit that makes it current; one a millisecond
// away (a byo-yomi game with no main time left) is due before that commit
// lands. A sweeper that finds it first must not drop it as stale, or the
// game would never be flagged.
func TestDeadlineDueWhenIndexedIsNotLost(t *testing.T) {
	t.Parallel()
	env := startGame(t, true)
	startClock(t, env, "")
	n := 40
	if testing.Short() {
		n = 10
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: byoyomi(time.Millisecond, 1, time.Second)})
			tb.play(t, firstMoves...)
			g := tb.waitEnded(t)
			if g.GetResult().GetMethod() != commonv1.EndMethod_END_METHOD_TIMEOUT {
				t.Errorf("game %s ended by %v", tb.id, g.GetResult().GetMethod())
			}
		})
	}
	wg.Wait()
}

// TestGetClocksAndStats reads a running clock and the operator view.
func TestGetClocksAndStats(t *testing.T) {
	t.Parallel()
	env := startGame(t, true)
	cfg := clock.DefaultConfig()
	cfg.GameAddr, cfg.KeyPrefix, cfg.ReplicaID = env.Addr, env.Config.KeyPrefix, "solo"
	cc := apptest.Start(t, redistest.Addr(t), clock.Bind(cfg))
	c := clockv1.NewClockServiceClient(cc)
	ctx := context.Background()

	private := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer(time.Minute)})
	g := private.play(t, firstMoves...)
	resp, err := c.GetClocks(private.as(commonv1.Side_SIDE_SECOND), &clockv1.GetClocksRequest{GameId: private.id})
	if err != nil {
		t.Fatalf("GetClocks with a seat credential: %v", err)
	}
	if resp.GetClocks().GetRunning() != commonv1.Side_SIDE_FIRST || !resp.GetClocks().GetDeadline().AsTime().Equal(deadlineOf(t, g)) ||
		resp.GetTimeControl().GetFischer().GetMainTime().AsDuration() != time.Minute {
		t.Fatalf("GetClocks: %v", resp)
	}
	if left := resp.GetClocks().GetFirst().GetMainLeft().AsDuration(); left <= 0 || left > time.Minute {
		t.Fatalf("main time left %v", left)
	}
	_, err = c.GetClocks(ctx, &clockv1.GetClocksRequest{GameId: private.id})
	wantCode(t, err, codes.PermissionDenied)

	flagged := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true, TimeControl: fischer(time.Second)})
	flagged.play(t, firstMoves...)
	flagged.waitEnded(t)
	if resp, err := c.GetClocks(ctx, &clockv1.GetClocksRequest{GameId: flagged.id}); err != nil || resp.GetClocks().GetRunning() != commonv1.Side_SIDE_UNSPECIFIED {
		t.Fatalf("clocks of a public ended game: %v, %v", resp, err)
	}

	// The statistics are for operators: a player's app has no service
	// credential.
	player, err := grpc.NewClient(cc.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer player.Close()
	_, err = clockv1.NewClockServiceClient(player).GetStats(private.as(commonv1.Side_SIDE_FIRST), &clockv1.GetStatsRequest{})
	wantCode(t, err, codes.Unauthenticated)

	st := waitOwners(t, c, "solo")
	if st.GetReplicaId() != "solo" || len(st.GetReplicas()) != 1 || st.GetReplicas()[0] != "solo" {
		t.Fatalf("replica %q of %v", st.GetReplicaId(), st.GetReplicas())
	}
	if len(st.GetShards()) != env.Config.DeadlineShards {
		t.Fatalf("%d shards, want %d", len(st.GetShards()), env.Config.DeadlineShards)
	}
	var pending, flags uint64
	for _, s := range st.GetShards() {
		pending += s.GetPending()
	}
	for _, b := range st.GetLateness() {
		flags += b.GetCount()
	}
	if pending < 1 || flags != 1 {
		t.Fatalf("pending %d (want the private game's deadline), flags %d (want 1)", pending, flags)
	}
	var expired uint64
	owned := 0
	for _, s := range st.GetSweepers() {
		expired += s.GetExpired()
		if s.GetOwned() {
			owned++
		}
		if s.GetOwned() && s.GetLastSweep() == nil {
			t.Fatalf("sweeper of shard %d never swept", s.GetShard())
		}
	}
	if expired != 1 || owned != env.Config.DeadlineShards {
		t.Fatalf("sweepers: %d expired (want 1), %d owned", expired, owned)
	}

	// The metrics are on the same port as the API.
	hr, err := http.Get("http://" + cc.Target() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer hr.Body.Close()
	body, _ := io.ReadAll(hr.Body)
	for _, name := range []string{"palace_clock_lateness", "palace_clock_deadlines", "palace_clock_owned_shards", "palace_clock_pending_deadlines"} {
		if !strings.Contains(string(body), name) {
			t.Errorf("/metrics has no %s", name)
		}
	}
}

func TestGetClocksBadInput(t *testing.T) {
	t.Parallel()
	env := startGame(t, false)
	c := startClock(t, env, "")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		id   string
		want codes.Code
	}{
		{name: "empty id", ctx: context.Background(), id: "", want: codes.InvalidArgument},
		{name: "overlong id", ctx: context.Background(), id: strings.Repeat("x", 65), want: codes.InvalidArgument},
		{name: "id with a brace", ctx: context.Background(), id: "a{b}", want: codes.InvalidArgument},
		{name: "unknown game", ctx: context.Background(), id: "nosuchgame", want: codes.NotFound},
		{name: "cancelled context", ctx: cancelled, id: "nosuchgame", want: codes.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.GetClocks(tt.ctx, &clockv1.GetClocksRequest{GameId: tt.id})
			wantCode(t, err, tt.want)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		edit    func(*clock.Config)
		wantErr []string
	}{
		{name: "defaults", edit: func(*clock.Config) {}},
		{name: "key prefix with a brace", edit: func(c *clock.Config) { c.KeyPrefix = "{prod}:" }, wantErr: []string{"--key-prefix"}},
		{name: "several game addresses", edit: func(c *clock.Config) { c.GameAddr = "g1:8080,g2:8080" }, wantErr: []string{"--game-addr", "not a list"}},
		{name: "one game address", edit: func(c *clock.Config) { c.GameAddr = "dns:///game:8080" }},
		{name: "no shards", edit: func(c *clock.Config) { c.DeadlineShards = 0 }, wantErr: []string{"--deadline-shards"}},
		{name: "lease shorter than three ticks", edit: func(c *clock.Config) { c.LeaseTTL = 200 * time.Millisecond }, wantErr: []string{"--clock-lease-ttl 200ms must be at least 3 times --clock-tick 100ms (300ms)"}},
		{name: "every problem at once", edit: func(c *clock.Config) { c.Poll, c.Batch, c.Workers = 0, 0, -1 },
			wantErr: []string{"--clock-poll", "--clock-batch", "--clock-workers"}},
		// The sweepers' limits were checked only once every other flag
		// was good, and named no flag.
		{name: "the sweepers' limits beside other problems", edit: func(c *clock.Config) {
			c.Poll, c.Batch, c.Workers, c.LeaseTTL = 0, 20000, 2000, 200*time.Millisecond
		}, wantErr: []string{"--clock-poll", "--clock-batch 20000: want 1..10000", "--clock-workers 2000: want 1..1024", "--clock-lease-ttl 200ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clock.DefaultConfig()
			tt.edit(&c)
			err := c.Validate()
			if (err != nil) != (len(tt.wantErr) > 0) {
				t.Fatalf("Validate() = %v, want errors %v", err, tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to mention %q", err, w)
				}
			}
		})
	}
}

// TestGetClocksWithTheGameServiceAway: the call between the services
// failing is Unavailable for the client, with no internal address or
// transport text in its message.
func TestGetClocksWithTheGameServiceAway(t *testing.T) {
	t.Parallel()
	env := startGame(t, false)
	c := startClockWith(t, env, "", func(c *clock.Config) { c.GameAddr = "127.0.0.1:1" })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.GetClocks(ctx, &clockv1.GetClocksRequest{GameId: "somegame"})
	wantCode(t, err, codes.Unavailable)
	if msg := status.Convert(err).Message(); strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "dial") {
		t.Fatalf("the client reads the internal call's failure: %q", msg)
	}
}

// TestGetClocksWithTheGameServiceSilent: a game service that stops
// answering without closing its connection (a frozen host) gets
// GetClocks an Unavailable within the call timeout, not a wait as long as
// the client's own deadline.
func TestGetClocksWithTheGameServiceSilent(t *testing.T) {
	t.Parallel()
	env := startGame(t, false)
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true})
	proxy := redistest.NewProxy(t, env.Addr)
	c := startClockWith(t, env, "", func(c *clock.Config) { c.GameAddr, c.CallTimeout = proxy.Addr(), time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.GetClocks(ctx, &clockv1.GetClocksRequest{GameId: tb.id}); err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole()
	start := time.Now()
	_, err := c.GetClocks(ctx, &clockv1.GetClocksRequest{GameId: tb.id})
	wantCode(t, err, codes.Unavailable)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Unavailable after %v", took)
	}
}

// throughAProxy starts a game service, a clock replica id (edited by
// edit) that calls it through a proxy, and a replica "good" that calls it
// directly, and waits until they share the shards.
func throughAProxy(t *testing.T, id string, edit func(*clock.Config)) (*gametest.Env, *redistest.Proxy, *grpc.ClientConn, clockv1.ClockServiceClient) {
	t.Helper()
	env := startGame(t, true)
	proxy := redistest.NewProxy(t, env.Addr)
	cfg := clock.DefaultConfig()
	cfg.GameAddr, cfg.KeyPrefix, cfg.DeadlineShards, cfg.ReplicaID = proxy.Addr(), env.Config.KeyPrefix, env.Config.DeadlineShards, id
	edit(&cfg)
	conn := apptest.Start(t, redistest.Addr(t), clock.Bind(cfg))
	waitOwners(t, clockv1.NewClockServiceClient(conn), id)
	good := startClock(t, env, "good")
	waitOwners(t, good, id, "good")
	return env, proxy, conn, good
}

// TestAReplicaCutOffFromTheGameServiceHandsItsShardsOver: a replica that
// reaches Redis but whose calls the game service never takes (here the
// game service is cut off from it; keys a rotation left behind do the
// same) hands its shards to the other replicas once every call has failed
// for --clock-hand-over-after, so that every game is flagged, and reports
// the clock service NOT_SERVING while the whole server stays SERVING. Once
// the game service answers its probe, it takes shards again.
func TestAReplicaCutOffFromTheGameServiceHandsItsShardsOver(t *testing.T) {
	t.Parallel()
	env, proxy, cutConn, good := throughAProxy(t, "cut-off", func(c *clock.Config) { c.HandOverAfter = time.Second })
	health := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		resp, err := healthpb.NewHealthClient(cutConn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetStatus()
	}
	clockService := clockv1.ClockService_ServiceDesc.ServiceName

	proxy.Cut()
	tables := make([]*table, 16)
	for i := range tables {
		tables[i] = create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer(time.Second)})
		tables[i].play(t, firstMoves...)
	}
	for _, tb := range tables {
		if g := tb.waitEnded(t); g.GetResult().GetMethod() != commonv1.EndMethod_END_METHOD_TIMEOUT {
			t.Fatalf("game %s ended by %v", tb.id, g.GetResult().GetMethod())
		}
	}
	waitOwners(t, good, "good")
	if st, whole := health(clockService), health(""); st != healthpb.HealthCheckResponse_NOT_SERVING || whole != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("cut off: the clock service is %v, the server %v; want NOT_SERVING and SERVING", st, whole)
	}

	proxy.Restore()
	waitOwners(t, good, "cut-off", "good")
	if st := health(clockService); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("back: the clock service is %v", st)
	}
}

// TestAReplicaWhoseGameServiceIsSilentHandsItsShardsOver: a replica whose
// game service takes its calls but never answers them (a frozen host),
// where a call fails only at its timeout (10 s here), hands its shards
// over once its calls have gone unanswered for --clock-hand-over-after,
// and a short probe confirms it: every game is flagged within a few
// seconds of its deadline, not after two call timeouts.
func TestAReplicaWhoseGameServiceIsSilentHandsItsShardsOver(t *testing.T) {
	t.Parallel()
	env, proxy, _, good := throughAProxy(t, "silent", func(c *clock.Config) { c.HandOverAfter, c.CallTimeout = time.Second, 10*time.Second })

	proxy.Hold()
	defer proxy.Restore()
	tables := make([]*table, 16)
	deadlines := make([]time.Time, len(tables))
	for i := range tables {
		tables[i] = create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer(time.Second)})
		deadlines[i] = tables[i].play(t, firstMoves...).GetClocks().GetDeadline().AsTime()
	}
	for i, tb := range tables {
		g := tb.waitEnded(t)
		if g.GetResult().GetMethod() != commonv1.EndMethod_END_METHOD_TIMEOUT {
			t.Fatalf("game %s ended by %v", tb.id, g.GetResult().GetMethod())
		}
		if late := g.GetEndedAt().AsTime().Sub(deadlines[i]); late > 5*time.Second {
			t.Errorf("game %s flagged %v after its deadline, want within the hand-over (1 s), a probe (1 s) and a tick", tb.id, late)
		}
	}
	waitOwners(t, good, "good")
}

// TestOneFailingGameHandsNoShardOver: a game whose deadline keeps failing
// (its stored state broken) while the game service answers every other
// call is no lost game service: the replica keeps its shards, stays
// SERVING, and flags the other games.
func TestOneFailingGameHandsNoShardOver(t *testing.T) {
	t.Parallel()
	env := startGame(t, true)
	cfg := clock.DefaultConfig()
	cfg.GameAddr, cfg.KeyPrefix, cfg.DeadlineShards, cfg.ReplicaID = env.Addr, env.Config.KeyPrefix, env.Config.DeadlineShards, "only"
	cfg.HandOverAfter = 500 * time.Millisecond
	conn := apptest.Start(t, redistest.Addr(t), clock.Bind(cfg))
	c := clockv1.NewClockServiceClient(conn)
	waitOwners(t, c, "only")

	broken := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer(time.Second)})
	broken.play(t, firstMoves...)
	if err := env.Redis.HSet(context.Background(), env.Config.KeyPrefix+"{g:"+broken.id+"}", "s", "{").Err(); err != nil {
		t.Fatal(err)
	}
	// The broken game's deadline fails at every retry from about 1 s on.
	ok := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer(3 * time.Second)})
	ok.play(t, firstMoves...)
	until := time.Now().Add(4 * time.Second)
	for time.Now().Before(until) {
		st, err := c.GetStats(context.Background(), &clockv1.GetStatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st.GetShards() {
			if s.GetOwner() != "only" {
				t.Fatalf("shard %d is held by %q: the replica handed its shards over for one failing game", s.GetShard(), s.GetOwner())
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if g := ok.waitEnded(t); g.GetResult().GetMethod() != commonv1.EndMethod_END_METHOD_TIMEOUT {
		t.Fatalf("the good game ended by %v", g.GetResult().GetMethod())
	}
	resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: clockv1.ClockService_ServiceDesc.ServiceName})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health %v %v, want SERVING", resp.GetStatus(), err)
	}
}

// TestAClockOnAnotherIndexIsNotServing: a clock replica started with
// another --key-prefix than the game service's finds nothing due in the
// index it sweeps, so no call of it ever fails; it must still report the
// clock service NOT_SERVING, since no game of that service would ever be
// flagged, while one on the game service's index serves.
func TestAClockOnAnotherIndexIsNotServing(t *testing.T) {
	t.Parallel()
	env := startGame(t, true)
	health := func(conn grpc.ClientConnInterface) healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: clockv1.ClockService_ServiceDesc.ServiceName})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetStatus()
	}
	start := func(prefix string) grpc.ClientConnInterface {
		cfg := clock.DefaultConfig()
		cfg.GameAddr, cfg.KeyPrefix, cfg.DeadlineShards = env.Addr, prefix, env.Config.DeadlineShards
		return apptest.Start(t, redistest.Addr(t), clock.Bind(cfg))
	}
	astray, right := start(env.Config.KeyPrefix+"astray:"), start(env.Config.KeyPrefix)
	until := time.Now().Add(endWithin)
	for health(astray) != healthpb.HealthCheckResponse_NOT_SERVING {
		if time.Now().After(until) {
			t.Fatalf("a clock sweeping %q beside a game service writing %q still serves", env.Config.KeyPrefix+"astray:", env.Config.KeyPrefix)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := health(right); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("the clock on the game service's own index is %v, want SERVING", st)
	}
}

// TestAFailingDeadlineIsKeptUntilItFlags: a deadline whose ExpireDeadline
// fails (here the game's stored state is unreadable for a while) is kept
// and retried, never dropped: once the game can be read again, it ends on
// time.
func TestAFailingDeadlineIsKeptUntilItFlags(t *testing.T) {
	t.Parallel()
	env := startGame(t, true)
	cfg := clock.DefaultConfig()
	cfg.GameAddr, cfg.KeyPrefix, cfg.DeadlineShards, cfg.ReplicaID = env.Addr, env.Config.KeyPrefix, env.Config.DeadlineShards, "only"
	conn := apptest.Start(t, redistest.Addr(t), clock.Bind(cfg))
	waitOwners(t, clockv1.NewClockServiceClient(conn), "only")

	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer(time.Second)})
	deadline := tb.play(t, firstMoves...).GetClocks().GetDeadline().AsTime()
	ctx := context.Background()
	key := env.Config.KeyPrefix + "{g:" + tb.id + "}"
	raw, err := env.Redis.HGet(ctx, key, "s").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Redis.HSet(ctx, key, "s", "{").Err(); err != nil {
		t.Fatal(err)
	}
	// Past the deadline by enough for several failed calls.
	time.Sleep(time.Until(deadline) + 2*time.Second)
	if err := env.Redis.HSet(ctx, key, "s", raw).Err(); err != nil {
		t.Fatal(err)
	}
	if g := tb.waitEnded(t); g.GetResult().GetMethod() != commonv1.EndMethod_END_METHOD_TIMEOUT {
		t.Fatalf("game ended by %v, want on time", g.GetResult().GetMethod())
	}
}

// TestALaggedMoveIsCreditedItsDelay: a move that reaches the server past
// its side's budget, within the lag grace, is in time when its client
// reports the network delay, and the game goes on.
func TestALaggedMoveIsCreditedItsDelay(t *testing.T) {
	t.Parallel()
	env := startGame(t, false)
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer(time.Second)})
	dl := deadlineOf(t, tb.play(t, firstMoves...))
	// 200 ms into the 1 s grace that follows the budget, leaving a loaded
	// machine most of the grace to deliver the move.
	time.Sleep(time.Until(dl.Add(-800 * time.Millisecond)))
	resp, err := tb.tryMove(commonv1.Side_SIDE_FIRST, thirdMove, time.Second)
	if err != nil {
		t.Fatalf("a move within the grace, with its delay reported: %v", err)
	}
	if g := resp.GetGame(); g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		t.Fatalf("game %s is %v after a move in time", tb.id, g.GetStatus())
	}
}
