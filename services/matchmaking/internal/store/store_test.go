package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

var janggi = commonv1.GameKind_GAME_KIND_JANGGI

func newStore(t *testing.T) *store.Store {
	t.Helper()
	return store.New(redistest.Client(t), redistest.Prefix(t))
}

func TestPoolID(t *testing.T) {
	tests := []struct {
		name string
		pool store.Pool
		want string
	}{
		{name: "rated byo-yomi", pool: store.Pool{Kind: janggi, Control: clock.Default(), Rated: true}, want: "janggi/5m+3x30s/rated"},
		{name: "casual fischer", pool: store.Pool{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Control: clock.Control{Kind: clock.Fischer, MainTime: 3 * time.Minute, Increment: 2 * time.Second}}, want: "xiangqi/3m+2s/casual"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.pool.ID(); got != tt.want {
				t.Fatalf("ID() = %q, want %q", got, tt.want)
			}
			back, err := store.ParsePool(tt.want)
			if err != nil || back != tt.pool {
				t.Fatalf("ParsePool(%q) = %v, %v", tt.want, back, err)
			}
			if len(tt.pool.Tag()) != 16 {
				t.Fatalf("tag %q", tt.pool.Tag())
			}
		})
	}
	for _, bad := range []string{"", "chess/5m/casual", "janggi/5m+3x30s/ranked", "janggi/zz/casual"} {
		if _, err := store.ParsePool(bad); err == nil {
			t.Errorf("ParsePool(%q) accepted", bad)
		}
	}
}

// TestConcurrentPairingPassesNeverPairTwice runs many pairing passes at
// once over one pool while tickets keep arriving: each ticket must end in
// exactly one match.
func TestConcurrentPairingPassesNeverPairTwice(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	pool := store.Pool{Kind: janggi, Control: clock.Default()}
	const n = 400
	params := store.PairParams{BaseWindow: 100, WidenPerSecond: 50, MaxPairs: 1000, Keep: time.Hour}

	var mu sync.Mutex
	seen := map[string]string{} // ticket -> match
	var matches []store.Match
	record := func(rs []store.PairResult) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rs {
			if r.Err != nil {
				t.Error(r.Err)
			}
			for _, m := range r.Matches {
				matches = append(matches, m)
				for _, id := range []string{m.A, m.B} {
					if prev, dup := seen[id]; dup {
						t.Errorf("ticket %s paired in %s and %s", id, prev, m.ID)
					}
					seen[id] = m.ID
				}
			}
		}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				p := params
				p.Now = time.Now()
				record(st.Pair(ctx, []store.Pool{pool}, p))
			}
		}()
	}
	players := map[string]string{}
	for i := range n {
		p := fmt.Sprintf("p%d", i)
		// Each dated as it is asked for: an entry has half the claim grace
		// from its date to be made, and entering them all takes longer
		// on a loaded machine.
		entered := time.Now()
		id, out, err := st.Enter(ctx, pool, store.Ticket{Player: p, Name: p, Rating: 1000 + (i*7)%300, Entered: entered, Expires: entered.Add(time.Hour)}, "r", time.Hour, nil)
		if err != nil || out != store.Entered {
			close(stop)
			wg.Wait()
			t.Fatalf("Enter: %v %v", out, err)
		}
		players[id] = p
	}
	// Let the passes drain the pool, then stop them.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		done := len(seen) == n
		mu.Unlock()
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if len(seen) != n || len(matches) != n/2 {
		t.Fatalf("%d tickets in %d matches, want %d in %d", len(seen), len(matches), n, n/2)
	}
	for _, m := range matches {
		if players[m.A] == players[m.B] {
			t.Fatalf("match %s pairs player %s with themselves", m.ID, players[m.A])
		}
		a, b, err := st.Tickets(ctx, pool, m)
		if err != nil || a.State != store.StatePaired || b.State != store.StatePaired || a.Match != m.ID || b.Match != m.ID {
			t.Fatalf("match %s: tickets %+v %+v %v", m.ID, a, b, err)
		}
	}
}

func TestApplyRating(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// games already played by a and b (sets their K-factor) and ratings
		aGames, bGames int
		aR, bR         int
		score          float64
		wantA, wantB   int
	}{
		{name: "first game between equals: K 40", aR: 1200, bR: 1200, score: 1, wantA: 1220, wantB: 1180},
		{name: "draw between equals", aR: 1200, bR: 1200, score: 0.5, wantA: 1200, wantB: 1200},
		{name: "established players: K 20", aGames: 30, bGames: 40, aR: 1500, bR: 1500, score: 0, wantA: 1490, wantB: 1510},
		{name: "upset", aGames: 30, bGames: 30, aR: 1000, bR: 1400, score: 1, wantA: 1018, wantB: 1382},
		{name: "provisional beats established", aGames: 3, bGames: 50, aR: 1200, bR: 1200, score: 1, wantA: 1220, wantB: 1190},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			a, b := store.Player{ID: "a", Name: "A"}, store.Player{ID: "b", Name: "B"}
			seed(t, st, a, b, tt.aGames, tt.bGames, tt.aR, tt.bR)
			got, err := st.ApplyRating(ctx, store.Outcome{GameID: "g-" + tt.name, Kind: janggi, A: a, B: b, ScoreA: tt.score, At: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			if !got.Done || got.AAfter != tt.wantA || got.BAfter != tt.wantB {
				t.Fatalf("got %+v, want %d and %d", got, tt.wantA, tt.wantB)
			}
			// The same game again changes nothing.
			again, err := st.ApplyRating(ctx, store.Outcome{GameID: "g-" + tt.name, Kind: janggi, A: a, B: b, ScoreA: tt.score, At: time.Now()})
			if err != nil || again.Done {
				t.Fatalf("second application: %+v %v", again, err)
			}
			r, _ := st.PlayerRating(ctx, janggi, "a")
			if r.Rating != tt.wantA || r.Games != tt.aGames+1 {
				t.Fatalf("stored %+v", r)
			}
		})
	}
}

// TestApplyRatingRefusesAPlayerWithoutAnID: a rating for the player ""
// would rank nobody on the leaderboard.
func TestApplyRatingRefusesAPlayerWithoutAnID(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	a := store.Player{ID: "a", Name: "A"}
	for _, o := range []store.Outcome{
		{GameID: "g1", Kind: janggi, A: a, ScoreA: 1, At: time.Now()},
		{GameID: "g2", Kind: janggi, B: a, ScoreA: 1, At: time.Now()},
	} {
		if got, err := st.ApplyRating(ctx, o); err == nil {
			t.Fatalf("%s applied: %+v", o.GameID, got)
		}
	}
	if r, err := st.PlayerRating(ctx, janggi, ""); err != nil || r.Games != 0 {
		t.Fatalf("the player \"\": %+v %v", r, err)
	}
}

// seed gives a and b ratings and game counts by writing the hashes the
// way the rating script does.
func seed(t *testing.T, st *store.Store, a, b store.Player, aGames, bGames, aR, bR int) {
	t.Helper()
	ctx := context.Background()
	// Play enough throw-away games to reach the counts, then set the
	// ratings through the same keys ApplyRating reads.
	for i := range max(aGames, bGames) {
		pa, pb := a, b
		if i >= aGames {
			pa = store.Player{ID: "x", Name: "X"}
		}
		if i >= bGames {
			pb = store.Player{ID: "y", Name: "Y"}
		}
		if _, err := st.ApplyRating(ctx, store.Outcome{GameID: fmt.Sprintf("seed-%d", i), Kind: janggi, A: pa, B: pb, ScoreA: 0.5, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.SetRatingForTest(ctx, janggi, a.ID, aR); err != nil {
		t.Fatal(err)
	}
	if err := st.SetRatingForTest(ctx, janggi, b.ID, bR); err != nil {
		t.Fatal(err)
	}
}

func TestLeaderboard(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	// p0 beats p1, p1 beats p2, ... : ratings descend with the index.
	for i := range 9 {
		a, b := store.Player{ID: fmt.Sprintf("p%d", i), Name: fmt.Sprintf("P%d", i)}, store.Player{ID: fmt.Sprintf("p%d", i+1), Name: fmt.Sprintf("P%d", i+1)}
		if _, err := st.ApplyRating(ctx, store.Outcome{GameID: fmt.Sprintf("g%d", i), Kind: janggi, A: a, B: b, ScoreA: 1, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	top, total, err := st.Leaderboard(ctx, janggi, store.Page{Start: 0, Stop: 2})
	if err != nil {
		t.Fatal(err)
	}
	if total != 10 || len(top) != 3 || top[0].Player != "p0" || top[0].Rank != 1 || top[0].Name != "P0" || top[0].Games != 1 {
		t.Fatalf("top %+v of %d", top, total)
	}
	for i := 1; i < len(top); i++ {
		if top[i].Rating > top[i-1].Rating {
			t.Fatalf("not sorted: %+v", top)
		}
	}
	around, _, err := st.Leaderboard(ctx, janggi, store.Page{Around: "p9", Reach: 2})
	if err != nil || len(around) != 3 || around[2].Player != "p9" || around[2].Rank != 10 {
		t.Fatalf("the page around the last: %+v %v", around, err)
	}
	if _, _, err := st.Leaderboard(ctx, janggi, store.Page{Around: "nobody", Reach: 2}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the page around nobody: %v", err)
	}
}

// TestEqualRatingsShareARank: two players rated alike are ranked alike,
// whatever their ids, and the next is ranked after both (1, 1, 3, 3), on
// a player's rating and on every page of the leaderboard.
func TestEqualRatingsShareARank(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	for i, pair := range [][2]string{{"zed", "yan"}, {"amy", "bob"}} {
		a, b := store.Player{ID: pair[0], Name: pair[0]}, store.Player{ID: pair[1], Name: pair[1]}
		if _, err := st.ApplyRating(ctx, store.Outcome{GameID: fmt.Sprintf("g%d", i), Kind: janggi, A: a, B: b, ScoreA: 1, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int64{"zed": 1, "amy": 1, "yan": 3, "bob": 3}
	for p, rank := range want {
		if r, err := st.PlayerRating(ctx, janggi, p); err != nil || r.Rank != rank {
			t.Fatalf("%s: rank %d (%v), want %d", p, r.Rank, err, rank)
		}
	}
	for start := range int64(4) {
		page, _, err := st.Leaderboard(ctx, janggi, store.Page{Start: start, Stop: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			if r.Rank != want[r.Player] {
				t.Fatalf("the page from %d ranks %s %d, want %d", start, r.Player, r.Rank, want[r.Player])
			}
		}
	}
}

// TestPairingRounds: in 1000, 1100, 1110, 1190 with a 200 window the
// closest neighbours 1100-1110 pair first; then 1000 and 1190 are
// neighbours, 190 apart, and pair in the same pass.
func TestPairingRounds(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	pool := store.Pool{Kind: janggi, Control: clock.Default()}
	now := time.Now()
	rating := map[string]int{}
	for i, r := range []int{1000, 1100, 1110, 1190} {
		p := fmt.Sprintf("p%d", i)
		id, _, err := st.Enter(ctx, pool, store.Ticket{Player: p, Rating: r, Entered: now, Expires: now.Add(time.Hour)}, "r", time.Hour, nil)
		if err != nil {
			t.Fatal(err)
		}
		rating[id] = r
	}
	res := st.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: now, BaseWindow: 200, MaxPairs: 10, Keep: time.Hour})
	if res[0].Err != nil || len(res[0].Matches) != 2 {
		t.Fatalf("pass: %+v", res)
	}
	got := map[[2]int]bool{}
	for _, m := range res[0].Matches {
		a, b := rating[m.A], rating[m.B]
		got[[2]int{min(a, b), max(a, b)}] = true
		if m.PlayerA.ID == "" || m.PlayerA.Entered.UnixMilli() != now.UnixMilli() {
			t.Fatalf("match lacks its players: %+v", m)
		}
	}
	if !got[[2]int{1100, 1110}] || !got[[2]int{1000, 1190}] {
		t.Fatalf("pairs %v", got)
	}
}

// TestOutlivedTicketsAreNotMadeAgain: tickets whose records expired while
// no matchmaker ran (an outage longer than a record's life) leave the
// queue at the next pass, expired or not yet, without their records being
// written back with no lifetime.
func TestOutlivedTicketsAreNotMadeAgain(t *testing.T) {
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	pool := store.Pool{Kind: janggi, Control: clock.Default()}
	now := time.Now()
	var gone []string
	for i, expires := range []time.Time{now.Add(time.Second), now.Add(time.Hour), now.Add(time.Hour)} {
		p := fmt.Sprintf("p%d", i)
		// Ratings far apart: no pair within the window.
		id, _, err := st.Enter(ctx, pool, store.Ticket{Player: p, Name: p, Rating: 1000 + 1000*i, Entered: now, Expires: expires}, "r", time.Hour, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if err := rdb.Del(ctx, prefix+"mm:{p:"+pool.Tag()+"}:t:"+id).Err(); err != nil {
				t.Fatal(err)
			}
			gone = append(gone, id)
		}
	}
	res := st.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: now.Add(2 * time.Second), BaseWindow: 100, MaxPairs: 10, Keep: time.Hour})
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if len(res[0].Expired) != 2 {
		t.Fatalf("expired %v, want the two tickets without records %v", res[0].Expired, gone)
	}
	for _, id := range gone {
		if n, err := rdb.Exists(ctx, prefix+"mm:{p:"+pool.Tag()+"}:t:"+id).Result(); err != nil || n != 0 {
			t.Fatalf("the record of %s was written again (%d, %v)", id, n, err)
		}
	}
	if n, err := rdb.ZCard(ctx, prefix+"mm:{p:"+pool.Tag()+"}:q").Result(); err != nil || n != 1 {
		t.Fatalf("%d tickets wait, want the one with its record (%v)", n, err)
	}
}

// TestRegisteredPoolsAreForgotten: the process's memory of the pools it
// registered holds the recent ones only, not every pool (every custom time
// control) it ever saw.
func TestRegisteredPoolsAreForgotten(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	now := time.Now()
	enter := func(i int, at time.Time) {
		t.Helper()
		pool := store.Pool{Kind: janggi, Control: clock.Control{Kind: clock.Fischer, MainTime: time.Duration(i+1) * time.Minute}}
		p := fmt.Sprintf("p%d", i)
		if _, _, err := st.Enter(ctx, pool, store.Ticket{Player: p, Name: p, Rating: 1000, Entered: at, Expires: at.Add(time.Hour)}, "r", time.Hour, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		enter(i, now)
	}
	if n := st.RegisteredForTest(); n != 50 {
		t.Fatalf("%d pools remembered after entering 50, want 50", n)
	}
	enter(50, now.Add(time.Minute))
	if n := st.RegisteredForTest(); n != 1 {
		t.Fatalf("%d pools remembered a minute later, want only the one just entered", n)
	}
}

// TestRematchOffersExpireWithTheirWindow: an offer nobody answers is kept
// for its window and an hour, not for as long as the game record; an
// accepted rematch is kept as long as the record.
func TestRematchOffersExpireWithTheirWindow(t *testing.T) {
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	now := time.Now()
	const keep = 30 * 24 * time.Hour
	ttl := func(id string) time.Duration {
		t.Helper()
		d, err := rdb.PTTL(ctx, prefix+"mm:{gm:"+id+"}:rm").Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if _, err := st.OfferRematch(ctx, "g1", "a", now, time.Minute, keep); err != nil {
		t.Fatal(err)
	}
	if d := ttl("g1"); d <= time.Minute || d > time.Minute+time.Hour {
		t.Fatalf("an open offer lives %v, want its minute's window and an hour", d)
	}
	out, err := st.AcceptRematch(ctx, "g1", "b", now.Add(time.Second), keep)
	if err != nil || !out.Go {
		t.Fatalf("accepting: %+v %v", out, err)
	}
	if d := ttl("g1"); d < keep-time.Minute {
		t.Fatalf("an accepted rematch lives %v, want %v", d, keep)
	}
	// Both offering is agreement: the second offer accepts, and keeps it.
	if _, err := st.OfferRematch(ctx, "g2", "a", now, time.Minute, keep); err != nil {
		t.Fatal(err)
	}
	if out, err := st.OfferRematch(ctx, "g2", "b", now.Add(time.Second), time.Minute, keep); err != nil || !out.Go {
		t.Fatalf("the second offer: %+v %v", out, err)
	}
	if d := ttl("g2"); d < keep-time.Minute {
		t.Fatalf("a rematch both offered lives %v, want %v", d, keep)
	}
}

// TestPairingLoadsItsScript: a Redis that has not seen the pairing script,
// new or restarted (SCRIPT FLUSH here), gets it loaded by the pass, which
// pairs as usual instead of failing with NOSCRIPT.
func TestPairingLoadsItsScript(t *testing.T) {
	rdb := redistest.Own(t).Client(t)
	st := store.New(rdb, "")
	ctx := context.Background()
	pool := store.Pool{Kind: janggi, Control: clock.Default()}
	now := time.Now()
	for round := range 2 {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			p := fmt.Sprintf("r%dp%d", round, i)
			if _, _, err := st.Enter(ctx, pool, store.Ticket{Player: p, Name: p, Rating: 1000, Entered: now, Expires: now.Add(time.Hour)}, p, time.Hour, nil); err != nil {
				t.Fatal(err)
			}
		}
		res := st.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: now, BaseWindow: 100, MaxPairs: 10, Keep: time.Hour})
		if res[0].Err != nil || len(res[0].Matches) != 1 {
			t.Fatalf("round %d: %+v", round, res)
		}
	}
}

// rateGames applies n rated games of p, each against an opponent of its
// own, with ids prefix0, prefix1, ...
func rateGames(t *testing.T, st *store.Store, p store.Player, prefix string, n int) {
	t.Helper()
	for i := range n {
		o := store.Player{ID: fmt.Sprintf("o-%s%d", prefix, i), Name: "O"}
		if _, err := st.ApplyRating(context.Background(), store.Outcome{GameID: fmt.Sprintf("%s%d", prefix, i), Kind: janggi, A: p, B: o, ScoreA: 1, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHistoryPagesFollowOneAnother: reading a history a page at a time
// gives every change once, in order, though games are rated between the
// pages; the last page says there is none after it.
func TestHistoryPagesFollowOneAnother(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	p := store.Player{ID: "pager", Name: "Pager"}
	rateGames(t, st, p, "old", 25)

	var seen []string
	page, err := st.History(ctx, janggi, p.ID, 0, 10)
	for round := 0; ; round++ {
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Changes {
			seen = append(seen, c.Game)
		}
		if page.Next == 0 {
			break
		}
		if round == 0 {
			rateGames(t, st, p, "new", 3) // rated between two reads
		}
		page, err = st.History(ctx, janggi, p.ID, page.Next, 10)
	}
	if len(seen) != 25 {
		t.Fatalf("paged through %d changes, want the 25 there were at the first page: %v", len(seen), seen)
	}
	for i, g := range seen {
		if want := fmt.Sprintf("old%d", 24-i); g != want {
			t.Fatalf("change %d is %s, want %s (latest first, none skipped or repeated): %v", i, g, want, seen)
		}
	}

	// A page exactly filled by the last changes has no next.
	last, err := st.History(ctx, janggi, p.ID, 0, 28)
	if err != nil || len(last.Changes) != 28 || last.Next != 0 {
		t.Fatalf("all 28 changes in one page: %d changes, next %d, %v", len(last.Changes), last.Next, err)
	}
	if _, err := st.History(ctx, janggi, p.ID, 30, 10); !errors.Is(err, store.ErrNoSuchPage) {
		t.Fatalf("a start beyond the player's 28 games: %v, want ErrNoSuchPage", err)
	}
	if none, err := st.History(ctx, janggi, "nobody", 0, 10); err != nil || len(none.Changes) != 0 || none.Next != 0 {
		t.Fatalf("a player without games: %+v %v", none, err)
	}
}

// TestHistoryPagesEndAtWhatIsKept: past the HistoryLength changes kept,
// the last page has no next.
func TestHistoryPagesEndAtWhatIsKept(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	p := store.Player{ID: "veteran", Name: "Veteran"}
	rateGames(t, st, p, "g", store.HistoryLength+5)
	n, next := 0, int64(0)
	for {
		page, err := st.History(ctx, janggi, p.ID, next, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Changes) == 0 {
			t.Fatalf("an empty page after %d changes: the page before it should have had no next", n)
		}
		n += len(page.Changes)
		if next = page.Next; next == 0 {
			break
		}
	}
	if n != store.HistoryLength {
		t.Fatalf("paged through %d changes, want the %d kept", n, store.HistoryLength)
	}
}
