package store_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/clock"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
	"github.com/redis/go-redis/v9"
)

// TestPairingWindows: two tickets pair when their difference is within
// the window of either, the one that waited longer widening it for both;
// the window stops widening at MaxWindow.
func TestPairingWindows(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	tests := []struct {
		name string
		// how long the first ticket waited; the second enters now
		waited    time.Duration
		gap       int
		maxWindow float64
		paired    bool
	}{
		// 100 + 50 x 10 s = 600 for the first, 100 for the second.
		{name: "within the longer waiter's window", waited: 10 * time.Second, gap: 500, paired: true},
		{name: "beyond both windows", waited: 10 * time.Second, gap: 700},
		{name: "beyond the widest window", waited: 10 * time.Second, gap: 500, maxWindow: 300},
		{name: "within the widest window", waited: 10 * time.Second, gap: 250, maxWindow: 300, paired: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			pool := store.Pool{Kind: janggi, Control: clock.Default()}
			for i, entered := range []time.Time{now.Add(-tt.waited), now} {
				p := fmt.Sprintf("p%d", i)
				if _, _, err := st.Enter(ctx, pool, store.Ticket{Player: p, Name: p, Rating: 1000 + i*tt.gap, Entered: entered, Expires: now.Add(time.Hour)}, "r", time.Hour, nil); err != nil {
					t.Fatal(err)
				}
			}
			res := st.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: now, BaseWindow: 100, WidenPerSecond: 50, MaxWindow: tt.maxWindow, MaxPairs: 10, Keep: time.Hour})
			if res[0].Err != nil {
				t.Fatal(res[0].Err)
			}
			if got := len(res[0].Matches) == 1; got != tt.paired {
				t.Fatalf("paired %v, want %v: %+v", got, tt.paired, res[0].Matches)
			}
		})
	}
}

// TestATicketEnteredByAHostAheadHasTheBaseWindow: a ticket entered by a
// replica whose clock is ahead of the pass's has waited, by the pass's
// clock, less than nothing; its window shrank below the base (5 s ahead
// at 50 a second: -150), and two tickets the base window pairs waited
// for a pass of that replica.
func TestATicketEnteredByAHostAheadHasTheBaseWindow(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	st := newStore(t)
	pool := store.Pool{Kind: janggi, Control: clock.Default()}
	for i, p := range []string{"p0", "p1"} {
		if _, _, err := st.Enter(ctx, pool, store.Ticket{Player: p, Name: p, Rating: 1000 + i*80, Entered: now.Add(5 * time.Second), Expires: now.Add(time.Hour)}, "r", time.Hour, nil); err != nil {
			t.Fatal(err)
		}
	}
	res := st.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: now, BaseWindow: 100, WidenPerSecond: 50, MaxPairs: 10, Keep: time.Hour})
	if res[0].Err != nil || len(res[0].Matches) != 1 {
		t.Fatalf("two tickets 80 apart, entered 5 s ahead of the pass's clock, with a base window of 100: %+v %v, want one pair", res[0].Matches, res[0].Err)
	}
}

// TestPairedTicketsLeaveTheQueue: a pass takes the tickets it pairs out of
// the queue at once, so that the queue holds only the waiting.
func TestPairedTicketsLeaveTheQueue(t *testing.T) {
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	pool := store.Pool{Kind: janggi, Control: clock.Default()}
	now := time.Now()
	for i, r := range []int{1000, 1010, 2000} {
		p := fmt.Sprintf("p%d", i)
		if _, _, err := st.Enter(ctx, pool, store.Ticket{Player: p, Name: p, Rating: r, Entered: now, Expires: now.Add(time.Hour)}, "r", time.Hour, nil); err != nil {
			t.Fatal(err)
		}
	}
	res := st.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: now, BaseWindow: 100, MaxPairs: 10, Keep: time.Hour})
	if res[0].Err != nil || len(res[0].Matches) != 1 {
		t.Fatalf("pass: %+v", res)
	}
	if n, err := rdb.ZCard(ctx, prefix+"mm:{p:"+pool.Tag()+"}:q").Result(); err != nil || n != 1 {
		t.Fatalf("%d tickets in the queue after the pass, want the one left waiting (%v)", n, err)
	}
}

// TestAPlayerIsNeverPairedWithThemselves: should a player's second ticket
// reach a pool's queue (entering refuses it, but the queue is read as it
// is), the pass still never pairs the player's two tickets.
func TestAPlayerIsNeverPairedWithThemselves(t *testing.T) {
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	pool := store.Pool{Kind: janggi, Control: clock.Default()}
	now := time.Now()
	if _, _, err := st.Enter(ctx, pool, store.Ticket{Player: "p", Name: "p", Rating: 1000, Entered: now, Expires: now.Add(time.Hour)}, "r", time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	// A second ticket of p, written as enter.lua writes one.
	b := prefix + "mm:{p:" + pool.Tag() + "}:"
	id := pool.Tag() + ".second"
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	exp := strconv.FormatInt(now.Add(time.Hour).UnixMilli(), 10)
	pipe := rdb.TxPipeline()
	pipe.HSet(ctx, b+"t:"+id, "player", "p", "name", "p", "rating", 1000, "enq", ms, "exp", exp, "state", "waiting", "pool", pool.ID())
	pipe.Expire(ctx, b+"t:"+id, time.Hour)
	pipe.ZAdd(ctx, b+"q", redis.Z{Score: 1000, Member: id})
	pipe.HSet(ctx, b+"meta", id, ms+":"+exp+":p")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	res := st.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: now, BaseWindow: 100, MaxPairs: 10, Keep: time.Hour})
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if len(res[0].Matches) != 0 {
		t.Fatalf("player p paired with themselves: %+v", res[0].Matches)
	}
}

// TestATicketExpiresAtItsExpiry: a pass at a ticket's expiry takes it out
// of the queue as expired; one a millisecond before leaves it waiting.
func TestATicketExpiresAtItsExpiry(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	pool := store.Pool{Kind: janggi, Control: clock.Default()}
	now := time.Now().Truncate(time.Millisecond)
	expires := now.Add(time.Minute)
	id, _, err := st.Enter(ctx, pool, store.Ticket{Player: "p", Name: "p", Rating: 1000, Entered: now, Expires: expires}, "r", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	pass := func(at time.Time) []string {
		t.Helper()
		res := st.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: at, BaseWindow: 100, MaxPairs: 10, Keep: time.Hour})
		if res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
		return res[0].Expired
	}
	if gone := pass(expires.Add(-time.Millisecond)); len(gone) != 0 {
		t.Fatalf("expired %v a millisecond before its expiry", gone)
	}
	if gone := pass(expires); len(gone) != 1 || gone[0] != id {
		t.Fatalf("expired %v at the expiry of %s", gone, id)
	}
	if tk, err := st.Ticket(ctx, id); err != nil || tk.State != store.StateExpired {
		t.Fatalf("ticket %+v %v, want expired", tk, err)
	}
}

// TestACancelledTicketLeavesTheQueue: a cancelled ticket is out of the
// queue at once, and the next pass pairs nobody with it.
func TestACancelledTicketLeavesTheQueue(t *testing.T) {
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	pool := store.Pool{Kind: janggi, Control: clock.Default()}
	now := time.Now()
	ids := make([]string, 2)
	for i := range ids {
		p := fmt.Sprintf("p%d", i)
		id, _, err := st.Enter(ctx, pool, store.Ticket{Player: p, Name: p, Rating: 1000, Entered: now, Expires: now.Add(time.Hour)}, "r", time.Hour, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	if out, err := st.Cancel(ctx, ids[0], "p0"); err != nil || out != store.CancelDone {
		t.Fatalf("cancel: %v %v", out, err)
	}
	if n, err := rdb.ZCard(ctx, prefix+"mm:{p:"+pool.Tag()+"}:q").Result(); err != nil || n != 1 {
		t.Fatalf("%d tickets in the queue after the cancel, want the other one (%v)", n, err)
	}
	if held, err := rdb.HExists(ctx, prefix+"mm:{p:"+pool.Tag()+"}:meta", ids[0]).Result(); err != nil || held {
		t.Fatalf("the queue still describes the cancelled ticket (%v)", err)
	}
	res := st.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: now, BaseWindow: 100, MaxPairs: 10, Keep: time.Hour})
	if res[0].Err != nil || len(res[0].Matches) != 0 || len(res[0].Expired) != 0 {
		t.Fatalf("pass after the cancel: %+v", res)
	}
	if tk, err := st.Ticket(ctx, ids[1]); err != nil || tk.State != store.StateWaiting {
		t.Fatalf("the other ticket %+v %v, want waiting", tk, err)
	}
}

// TestAnotherPlayersTicketIsNotCancelled: a cancel by another player is
// refused and leaves the ticket waiting.
func TestAnotherPlayersTicketIsNotCancelled(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	pool := store.Pool{Kind: janggi, Control: clock.Default()}
	now := time.Now()
	id, _, err := st.Enter(ctx, pool, store.Ticket{Player: "p", Name: "p", Rating: 1000, Entered: now, Expires: now.Add(time.Hour)}, "r", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := st.Cancel(ctx, id, "q"); err != nil || out != store.CancelNotOwner {
		t.Fatalf("cancel by q: %v %v, want refused", out, err)
	}
	if tk, err := st.Ticket(ctx, id); err != nil || tk.State != store.StateWaiting {
		t.Fatalf("ticket %+v %v, want waiting", tk, err)
	}
}

// TestAPassMakesAtMostMaxPairs: a pass stops at MaxPairs matches, leaving
// the rest waiting for the next.
func TestAPassMakesAtMostMaxPairs(t *testing.T) {
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	pool := store.Pool{Kind: janggi, Control: clock.Default()}
	now := time.Now()
	for i := range 6 {
		p := fmt.Sprintf("p%d", i)
		if _, _, err := st.Enter(ctx, pool, store.Ticket{Player: p, Name: p, Rating: 1000 + 10*i, Entered: now, Expires: now.Add(time.Hour)}, "r", time.Hour, nil); err != nil {
			t.Fatal(err)
		}
	}
	res := st.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: now, BaseWindow: 100, MaxPairs: 2, Keep: time.Hour})
	if res[0].Err != nil || len(res[0].Matches) != 2 {
		t.Fatalf("pass: %+v, want 2 matches", res)
	}
	if n, err := rdb.ZCard(ctx, prefix+"mm:{p:"+pool.Tag()+"}:q").Result(); err != nil || n != 2 {
		t.Fatalf("%d tickets wait after the pass, want 2 (%v)", n, err)
	}
}

// TestTheLongestWaiterIsNotPassedOver: with the default window (200,
// widening 100 a second, no bound), a player at the top of the rating
// range who has waited 9m50s (a window of 59,200: anyone) was passed over
// by a pass that paired two players who arrived that instant, and expired
// without a game at the ticket TTL (10 min), although every pass could
// have given them one: closest-first pairing never looked at how long a
// ticket waited. A ticket past half its life is served first.
func TestTheLongestWaiterIsNotPassedOver(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	pool := store.Pool{Kind: janggi, Control: clock.Default()}
	now := time.Now().Truncate(time.Millisecond)
	ttl := 10 * time.Minute
	enter := func(player string, rating int, entered time.Time) string {
		t.Helper()
		id, _, err := st.Enter(ctx, pool, store.Ticket{Player: player, Name: player, Rating: rating, Entered: entered, Expires: entered.Add(ttl)}, "r", ttl+time.Hour, nil)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	params := func(at time.Time) store.PairParams {
		return store.PairParams{Now: at, BaseWindow: 200, WidenPerSecond: 100, MaxPairs: 1000, Keep: time.Hour}
	}
	old := enter("veteran", 2400, now.Add(-ttl+10*time.Second))
	enter("new1", 1200, now)
	enter("new2", 1210, now)
	res := st.Pair(ctx, []store.Pool{pool}, params(now))
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	served := false
	for _, m := range res[0].Matches {
		if m.A == old || m.B == old {
			served = true
		}
	}
	if !served {
		// Nobody else comes in the last 10 s: the veteran expires.
		first := res[0].Matches
		res = st.Pair(ctx, []store.Pool{pool}, params(now.Add(10*time.Second)))
		t.Fatalf("the ticket waiting 9m50s, within everyone's reach, was left while the two newcomers were paired together (%+v); at its expiry the next pass expired it: %v (veteran %s)", first, res[0].Expired, old)
	}
}

// pairDefaults are the service's default pairing parameters
// (--pairing-window 200, --pairing-widen 100, no max window).
func pairDefaults(at time.Time) store.PairParams {
	return store.PairParams{Now: at, BaseWindow: 200, WidenPerSecond: 100, MaxPairs: 1000, Keep: time.Hour}
}

func enterAt(t *testing.T, st *store.Store, pool store.Pool, player string, rating int, entered time.Time, ttl time.Duration) string {
	t.Helper()
	id, out, err := st.Enter(context.Background(), pool, store.Ticket{Player: player, Name: player, Rating: rating, Entered: entered, Expires: entered.Add(ttl)}, "r-"+player, ttl+time.Hour, nil)
	if err != nil || out != store.Entered {
		t.Fatalf("enter %s: %v %v", player, out, err)
	}
	return id
}

func pairedIn(ms []store.Match, id string) bool {
	for _, m := range ms {
		if m.A == id || m.B == id {
			return true
		}
	}
	return false
}

// queueAtNow is a fresh store with an empty pool, the time now, and a
// ticket's default life.
func queueAtNow(t *testing.T) (context.Context, *store.Store, store.Pool, time.Time, time.Duration) {
	t.Helper()
	return context.Background(), newStore(t), store.Pool{Kind: janggi, Control: clock.Default()}, time.Now().Truncate(time.Millisecond), 10 * time.Minute
}

// TestEqualRatingsPairTheEarliestTicketFirst: a player who has waited a
// minute at 1200 (the rating of every guest and new account that gives
// no estimate) and two newcomers at 1200 before the next pass: the pass
// pairs one couple and leaves one ticket. It broke the tie by the
// tickets' random ids, leaving the one who came first waiting about once
// in three; whoever entered first gets the game.
func TestEqualRatingsPairTheEarliestTicketFirst(t *testing.T) {
	ctx := context.Background()
	const trials = 30
	left := 0
	for i := range trials {
		_, st, pool, now, ttl := queueAtNow(t)
		veteran := enterAt(t, st, pool, "veteran", 1200, now.Add(-time.Minute), ttl)
		enterAt(t, st, pool, "new1", 1200, now, ttl)
		enterAt(t, st, pool, "new2", 1200, now, ttl)
		res := st.Pair(ctx, []store.Pool{pool}, pairDefaults(now))
		if res[0].Err != nil || len(res[0].Matches) != 1 {
			t.Fatalf("trial %d: %+v %v, want one pair", i, res[0].Matches, res[0].Err)
		}
		if !pairedIn(res[0].Matches, veteran) {
			left++
		}
	}
	if left > 0 {
		t.Fatalf("in %d of %d passes, the ticket that had waited a minute at 1200 was left waiting while two tickets at 1200 that had just entered were paired together", left, trials)
	}
}

// TestAnEquallyCloseNewcomerDoesNotTakeTheOpponentOfOneWhoWaited: a
// player at 1500 has waited 4 minutes (not yet past half the 10-minute
// TTL); newcomers arrive at 1490 and 1495, 1495 exactly as close to
// either. The tie went to the lower-rated couple, so with such arrivals
// the one who waited was passed over pass after pass until their ticket
// was past half its life; the earlier entry wins the tie.
func TestAnEquallyCloseNewcomerDoesNotTakeTheOpponentOfOneWhoWaited(t *testing.T) {
	ctx, st, pool, now, ttl := queueAtNow(t)
	veteran := enterAt(t, st, pool, "veteran", 1500, now.Add(-4*time.Minute), ttl)
	passedOver := 0
	for i := range 10 {
		at := now.Add(time.Duration(i) * 5 * time.Second)
		enterAt(t, st, pool, fmt.Sprintf("low%d", i), 1490, at, ttl)
		enterAt(t, st, pool, fmt.Sprintf("mid%d", i), 1495, at, ttl)
		res := st.Pair(ctx, []store.Pool{pool}, pairDefaults(at))
		if res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
		if pairedIn(res[0].Matches, veteran) {
			break
		}
		passedOver++
	}
	if passedOver > 0 {
		t.Fatalf("the ticket waiting 4 minutes at 1500 was passed over %d times by newcomers at 1490 taking a 1495 exactly as close to it", passedOver)
	}
}

// TestEquallyCloseNeighboursAreAllPaired: four tickets 200 apart (a
// client's level picker's steps), the 1400 one entered first. Ranking
// pairs as close by their earlier entry took the middle pair (1200-1400)
// first, leaving 1000 and 1600, too far apart, unpaired: as many pairs as
// can be are made of pairs as close, the earlier entry deciding only
// which ticket an odd chain leaves.
func TestEquallyCloseNeighboursAreAllPaired(t *testing.T) {
	for _, maxWindow := range []float64{0, 200} {
		ctx, st, pool, now, ttl := queueAtNow(t)
		enterAt(t, st, pool, "a1000", 1000, now, ttl)
		enterAt(t, st, pool, "b1200", 1200, now, ttl)
		enterAt(t, st, pool, "c1400", 1400, now.Add(-2*time.Second), ttl)
		enterAt(t, st, pool, "d1600", 1600, now, ttl)
		p := pairDefaults(now)
		p.MaxWindow = maxWindow
		res := st.Pair(ctx, []store.Pool{pool}, p)
		if res[0].Err != nil || len(res[0].Matches) != 2 {
			t.Fatalf("max window %v: %+v %v, want 1000-1200 and 1400-1600 paired", maxWindow, res[0].Matches, res[0].Err)
		}
	}
}

// TestAnOddChainLeavesItsNewestTicket: five tickets 100 apart, the one at
// 1400 (which the others can pair around) the last to enter: the pass
// pairs the four others. Were the newest at 1300, leaving it would leave
// two more unpaired, so the newest of those that can be left (1200, 1400
// and 1600: the one at 1600 entered last of them) waits instead.
func TestAnOddChainLeavesItsNewestTicket(t *testing.T) {
	for _, tc := range []struct {
		newest string
		left   string
	}{{"p1400", "p1400"}, {"p1300", "p1600"}} {
		ctx, st, pool, now, ttl := queueAtNow(t)
		ids := map[string]string{}
		for i, r := range []int{1200, 1300, 1400, 1500, 1600} {
			name := fmt.Sprintf("p%d", r)
			at := now.Add(-time.Duration(10-i) * time.Millisecond)
			if name == tc.newest {
				at = now
			}
			ids[name] = enterAt(t, st, pool, name, r, at, ttl)
		}
		res := st.Pair(ctx, []store.Pool{pool}, pairDefaults(now))
		if res[0].Err != nil || len(res[0].Matches) != 2 {
			t.Fatalf("newest %s: %+v %v, want two pairs", tc.newest, res[0].Matches, res[0].Err)
		}
		if pairedIn(res[0].Matches, ids[tc.left]) {
			t.Fatalf("newest %s: %s was paired, want it left: %+v", tc.newest, tc.left, res[0].Matches)
		}
	}
}

// TestAnOddChainLeavesATicketThatCanPairBeyondIt: 1100 (entered just
// now), 1200 (2 s ago), 1300 (1 s ago) are a chain 100 apart; 1500 (1 s
// ago, a window of 300) is 200 from 1300 and 400 from 1100. Leaving the
// chain's newest (1100) paired 1200-1300 and left 1100 and 1500, 400
// apart: one game, where leaving 1300 makes two (1100-1200, then
// 1300-1500).
func TestAnOddChainLeavesATicketThatCanPairBeyondIt(t *testing.T) {
	ctx, st, pool, now, ttl := queueAtNow(t)
	enterAt(t, st, pool, "a1100", 1100, now, ttl)
	enterAt(t, st, pool, "b1200", 1200, now.Add(-2*time.Second), ttl)
	enterAt(t, st, pool, "c1300", 1300, now.Add(-time.Second), ttl)
	enterAt(t, st, pool, "d1500", 1500, now.Add(-time.Second), ttl)
	res := st.Pair(ctx, []store.Pool{pool}, pairDefaults(now))
	if res[0].Err != nil || len(res[0].Matches) != 2 {
		t.Fatalf("%d pairs %+v %v, want 2 (1100-1200 and 1300-1500)", len(res[0].Matches), res[0].Matches, res[0].Err)
	}
}

// TestAnOddChainLeavesItsNewestWhenNoneCanPairNext: 1100 (entered now),
// 1200 (3 s ago), 1300 (4 s ago) are a chain 100 apart; 1500 (1 s ago) is
// within 1300's reach but pairs with 1650 in the same round. Counting
// 1500 as 1300's next partner left 1300, the oldest of the chain, for the
// newcomer at 1100 to play: no ticket of the chain can pair next, so the
// newest is left.
func TestAnOddChainLeavesItsNewestWhenNoneCanPairNext(t *testing.T) {
	ctx, st, pool, now, ttl := queueAtNow(t)
	a := enterAt(t, st, pool, "a1100", 1100, now, ttl)
	enterAt(t, st, pool, "b1200", 1200, now.Add(-3*time.Second), ttl)
	c := enterAt(t, st, pool, "c1300", 1300, now.Add(-4*time.Second), ttl)
	enterAt(t, st, pool, "d1500", 1500, now.Add(-time.Second), ttl)
	enterAt(t, st, pool, "e1650", 1650, now.Add(-time.Second), ttl)
	res := st.Pair(ctx, []store.Pool{pool}, pairDefaults(now))
	if res[0].Err != nil || len(res[0].Matches) != 2 {
		t.Fatalf("%d pairs %+v %v, want 2", len(res[0].Matches), res[0].Matches, res[0].Err)
	}
	if !pairedIn(res[0].Matches, c) || pairedIn(res[0].Matches, a) {
		t.Fatalf("%+v: want 1300 (waiting 4 s) paired and 1100 (entered now) left, as no ticket of the chain can pair next", res[0].Matches)
	}
}

// TestAnOddChainSeesWhichWayItsNeighbourPairs: ratings 640, 750, 880 |
// 1000, 1100, 1200 (a chain 100 apart), windows about 200. 880 could pair
// with 750, but 750 pairs with 640, closer, in this very round, so 880 is
// free for 1000 next round. 880 was taken for 750's from their windows
// alone, and the chain left 1200, which can pair with nobody: 2 pairs
// where leaving 1000 makes 3.
func TestAnOddChainSeesWhichWayItsNeighbourPairs(t *testing.T) {
	ctx, st, pool, now, ttl := queueAtNow(t)
	ms := func(n int) time.Time { return now.Add(-time.Duration(n) * time.Millisecond) }
	enterAt(t, st, pool, "x640", 640, ms(6), ttl)
	enterAt(t, st, pool, "f750", 750, ms(5), ttl)
	j := enterAt(t, st, pool, "j880", 880, ms(4), ttl)
	a := enterAt(t, st, pool, "a1000", 1000, ms(3), ttl)
	enterAt(t, st, pool, "b1100", 1100, ms(2), ttl)
	c := enterAt(t, st, pool, "c1200", 1200, now, ttl)
	res := st.Pair(ctx, []store.Pool{pool}, pairDefaults(now))
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	ms2 := res[0].Matches
	if len(ms2) != 3 || !pairedIn(ms2, a) || !pairedIn(ms2, j) || !pairedIn(ms2, c) {
		t.Fatalf("%d pairs %+v: want 3 (640-750, 1100-1200, then 880-1000); 880 paired %v, 1000 %v, 1200 %v",
			len(ms2), ms2, pairedIn(ms2, j), pairedIn(ms2, a), pairedIn(ms2, c))
	}
}

// TestAnOddChainLeavesWhomTheRoundLeavesANeighbour: the chain 1000, 1100,
// 1200 (1200 the newest) beside 850, and higher tickets whose pairs this
// round were guessed from the chain's side: a couple already paired taken
// for a neighbour, a ticket that pairs the other way taken for one that
// stays. Left 1200, which can pair with nobody, and 850 with it: 3 pairs
// where leaving 1000 (free for 850 next round) makes 4. The ticket a
// chain leaves is chosen once the round's other pairs are known.
func TestAnOddChainLeavesWhomTheRoundLeavesANeighbour(t *testing.T) {
	for _, higher := range [][]int{{1350, 1470, 1500, 1510, 1560}, {1350, 1470, 1580, 1685}} {
		ctx, st, pool, now, ttl := queueAtNow(t)
		ids := map[int]string{}
		for i, r := range append([]int{850, 1000, 1100}, higher...) {
			ids[r] = enterAt(t, st, pool, fmt.Sprintf("p%d", r), r, now.Add(-time.Duration(20-i)*time.Millisecond), ttl)
		}
		ids[1200] = enterAt(t, st, pool, "p1200", 1200, now, ttl)
		res := st.Pair(ctx, []store.Pool{pool}, pairDefaults(now))
		if res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
		ms := res[0].Matches
		if want := (len(higher) + 4) / 2; len(ms) != want || !pairedIn(ms, ids[850]) || !pairedIn(ms, ids[1200]) {
			t.Fatalf("higher %v: %d pairs %+v, want %d: 1100-1200, then 850-1000", higher, len(ms), ms, want)
		}
	}
}

// TestAChainsLeftTicketPairedLaterIsNotPairedAgain: the chain 1000,
// 1010, 1020 (10 apart, 1020 the newest) leaves 1020 out; the next group
// (12 apart) pairs 1020 with 1032 in the same round. Choosing the chain's
// left ticket again (1000, which can pair with 985) re-paired the chain
// as 1010-1020, and 1020 was paired twice: a chain none of whose tickets
// is left is not chosen again.
func TestAChainsLeftTicketPairedLaterIsNotPairedAgain(t *testing.T) {
	ctx, st, pool, now, ttl := queueAtNow(t)
	ids := map[string]int{}
	for i, r := range []int{985, 1000, 1010, 1032} {
		ids[enterAt(t, st, pool, fmt.Sprintf("p%d", r), r, now.Add(-time.Duration(20-i)*time.Millisecond), ttl)] = r
	}
	ids[enterAt(t, st, pool, "p1020", 1020, now, ttl)] = 1020
	p := store.PairParams{Now: now, BaseWindow: 30, WidenPerSecond: 0, MaxPairs: 1000, Keep: time.Hour}
	res := st.Pair(ctx, []store.Pool{pool}, p)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	seen := map[string]bool{}
	var desc []string
	dup := false
	for _, m := range res[0].Matches {
		desc = append(desc, fmt.Sprintf("%d-%d", ids[m.A], ids[m.B]))
		if seen[m.A] || seen[m.B] {
			dup = true
		}
		seen[m.A], seen[m.B] = true, true
	}
	if dup || len(res[0].Matches) > 2 {
		t.Fatalf("5 tickets gave %d pairs %v: a ticket paired twice", len(res[0].Matches), desc)
	}
}

// TestRandomPassesKeepEveryInvariant: random small pools (ratings 5
// apart, so that ties and chains abound; narrow windows; some tickets past
// half their life; small MaxPairs): each ticket paired at most once,
// pairs within either window, never a player with themselves, at most
// MaxPairs pairs, and the tickets the pass took from the queue exactly
// those it paired or expired.
func TestRandomPassesKeepEveryInvariant(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))
	rdb := redistest.Client(t)
	for trial := range 300 {
		prefix := redistest.Prefix(t)
		st := store.New(rdb, prefix)
		pool := store.Pool{Kind: janggi, Control: clock.Default()}
		qkey := prefix + "mm:{p:" + pool.Tag() + "}:q"
		now := time.Now().Truncate(time.Millisecond)
		p := store.PairParams{Now: now, BaseWindow: float64(20 + 10*rng.IntN(10)), WidenPerSecond: float64(rng.IntN(3) * 20), MaxPairs: 1 + rng.IntN(4), Keep: time.Hour}
		if rng.IntN(3) == 0 {
			p.MaxPairs = 1000
		}
		type ticket struct {
			rating int
			at     time.Time
			player string
		}
		byID := map[string]ticket{}
		var order []string
		n := 2 + rng.IntN(10)
		for i := range n {
			ttl := 10 * time.Minute
			if rng.IntN(4) == 0 {
				ttl = time.Duration(3500+rng.IntN(3000)) * time.Millisecond
			}
			tk := ticket{rating: 1000 + 5*rng.IntN(30), at: now.Add(-time.Duration(rng.IntN(3000)) * time.Millisecond), player: fmt.Sprintf("t%d", i)}
			id := enterAt(t, st, pool, tk.player, tk.rating, tk.at, ttl)
			byID[id] = tk
			order = append(order, fmt.Sprintf("%d@%d", tk.rating, now.Sub(tk.at).Milliseconds()))
		}
		before, err := rdb.ZRange(ctx, qkey, 0, -1).Result()
		if err != nil || len(before) != n {
			t.Fatalf("trial %d: queue %v %v", trial, before, err)
		}
		window := func(tk ticket) float64 {
			w := p.BaseWindow + p.WidenPerSecond*float64(max(0, now.Sub(tk.at).Milliseconds()))/1000
			return w
		}
		res := st.Pair(ctx, []store.Pool{pool}, p)
		if res[0].Err != nil {
			t.Fatalf("trial %d: %v", trial, res[0].Err)
		}
		seen := map[string]bool{}
		var desc []string
		for _, m := range res[0].Matches {
			desc = append(desc, fmt.Sprintf("%d-%d", byID[m.A].rating, byID[m.B].rating))
		}
		for _, m := range res[0].Matches {
			a, b := byID[m.A], byID[m.B]
			if m.A == m.B || seen[m.A] || seen[m.B] || a.player == b.player {
				t.Fatalf("trial %d (pool %v, %+v): pairs %v: a ticket paired twice or a player with themselves", trial, order, p, desc)
			}
			seen[m.A], seen[m.B] = true, true
			if d := math.Abs(float64(a.rating - b.rating)); d > math.Max(window(a), window(b)) {
				t.Fatalf("trial %d (pool %v): pair %d-%d beyond both windows", trial, order, a.rating, b.rating)
			}
		}
		if len(res[0].Matches) > p.MaxPairs {
			t.Fatalf("trial %d (pool %v): %d pairs > MaxPairs %d: %v", trial, order, len(res[0].Matches), p.MaxPairs, desc)
		}
		after, err := rdb.ZRange(ctx, qkey, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		left := map[string]bool{}
		for _, id := range after {
			left[id] = true
		}
		exp := map[string]bool{}
		for _, id := range res[0].Expired {
			exp[id] = true
		}
		for _, id := range before {
			removed := !left[id]
			if removed != (seen[id] || exp[id]) {
				t.Fatalf("trial %d (pool %v): ticket %d removed %v, paired %v, expired %v (pairs %v)", trial, order, byID[id].rating, removed, seen[id], exp[id], desc)
			}
		}
	}
}
