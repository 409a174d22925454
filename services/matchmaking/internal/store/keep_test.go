package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// TestATicketOfAGivenUpMatchIsKeptAnHour: a ticket is kept at least an
// hour once matched, cancelled or expired (the proto, EnterQueue), so that
// a retry of its request still finds it. One that expires because its
// match was given up (the game could not be made) kept only what was left
// of its entry's lifetime: paired near the end of its wait, an hour less
// the give-up time (here --ticket-ttl is 2 s, the pairing at 1.8 s, the
// give-up 1.2 s later).
func TestATicketOfAGivenUpMatchIsKeptAnHour(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Control: clock.Default()}
	const ttl = 2 * time.Second
	keep := ttl + time.Hour // as the handler enters tickets
	now := time.Now()
	var ids []string
	for _, p := range []string{"p1", "p2"} {
		id, out, err := st.Enter(ctx, pool, store.Ticket{Player: p, Name: p, Rating: 1200, Entered: now, Expires: now.Add(ttl)}, "r", keep, nil)
		if err != nil || out != store.Entered {
			t.Fatal(out, err)
		}
		ids = append(ids, id)
	}
	time.Sleep(1800 * time.Millisecond)
	res := st.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: time.Now(), BaseWindow: 100, MaxPairs: 10, Keep: time.Hour})
	if res[0].Err != nil || len(res[0].Matches) != 1 {
		t.Fatalf("pair: %+v", res[0])
	}
	time.Sleep(1200 * time.Millisecond) // the game service is away: give up
	if v, err := st.Void(ctx, pool, res[0].Matches[0], time.Now(), time.Hour); err != nil || !v.GaveUp {
		t.Fatalf("void: %+v %v", v, err)
	}
	for _, id := range ids {
		tk, err := st.Ticket(ctx, id)
		if err != nil || tk.State != store.StateExpired {
			t.Fatalf("ticket %s: %+v %v, want expired", id, tk, err)
		}
		tag, _ := store.TicketTag(id)
		left, err := rdb.PTTL(ctx, prefix+"mm:{p:"+tag+"}:t:"+id).Result()
		if err != nil {
			t.Fatal(err)
		}
		if left < time.Hour-100*time.Millisecond {
			t.Fatalf("ticket %s, expired now (its match given up), is kept %v more, want at least an hour (a matched one gets an hour: finish.lua)", id, left)
		}
	}
}

// TestARetryWhileItsEndedTicketIsKeptGetsThatTicket: the proto
// (EnterQueue): a retry returns the same ticket as it is now, also once
// cancelled or expired. Making a match's game, or giving it up, keeps its
// tickets an hour from then; the request key, which lived only the
// ticket's first keep (--ticket-ttl + 1h from the entry), expired first,
// and a retry while the ticket was kept entered the player again. A
// request is remembered a grace longer (Store.RequestGrace). Durations are
// scaled down: --ticket-ttl 1 s, "an hour" 2 s.
func TestARetryWhileItsEndedTicketIsKeptGetsThatTicket(t *testing.T) {
	for _, end := range []string{"given up", "matched"} {
		t.Run(end, func(t *testing.T) {
			rdb, prefix := redistest.Client(t), redistest.Prefix(t)
			st := store.New(rdb, prefix)
			ctx := context.Background()
			pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Control: clock.Default()}
			const ttl, hour = time.Second, 2 * time.Second
			start := time.Now()
			var ids []string
			for _, p := range []string{"p1", "p2"} {
				id, out, err := st.Enter(ctx, pool, store.Ticket{Player: p, Name: p, Rating: 1200, Entered: start, Expires: start.Add(ttl)}, "r", ttl+hour, nil)
				if err != nil || out != store.Entered {
					t.Fatal(out, err)
				}
				ids = append(ids, id)
			}
			time.Sleep(500 * time.Millisecond)
			res := st.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: time.Now(), BaseWindow: 100, MaxPairs: 10, Keep: hour})
			if res[0].Err != nil || len(res[0].Matches) != 1 {
				t.Fatalf("pair: %+v", res[0])
			}
			m := res[0].Matches[0]
			// The game is made, or given up, 2 s after the entry (within
			// the wait plus --give-up-after in real time).
			time.Sleep(time.Until(start.Add(2 * time.Second)))
			switch end {
			case "given up":
				if v, err := st.Void(ctx, pool, m, time.Now(), hour); err != nil || !v.GaveUp {
					t.Fatalf("void: %+v %v", v, err)
				}
			case "matched":
				g := store.Grant{Side: "cho", Token: "tok", Expires: time.Now().Add(time.Hour)}
				if done, err := st.Finish(ctx, pool, m, "g1", g, g, time.Now(), hour, nil, 0); err != nil || !done {
					t.Fatalf("finish: %v %v", done, err)
				}
			}
			// Past the entry's first lifetime (ttl + hour = 3 s), within the
			// hour the ended ticket is kept (until 4 s).
			time.Sleep(time.Until(start.Add(3400 * time.Millisecond)))
			kept, err := st.Ticket(ctx, ids[0])
			if err != nil {
				t.Fatalf("ticket %s, %s 1.4 s ago, is no longer kept (%v): the store keeps it less than the scaled hour", ids[0], end, err)
			}
			now := time.Now()
			id, out, err := st.Enter(ctx, pool, store.Ticket{Player: "p1", Name: "p1", Rating: 1200, Entered: now, Expires: now.Add(ttl)}, "r", ttl+hour, nil)
			if err != nil || out != store.Duplicate || id != ids[0] {
				t.Fatalf("retry of request \"r\" while its ticket %s (%s, state %s) is still kept: got %s outcome %v err %v; want Duplicate with %s (the proto: a retry returns the same ticket as it is now) — the request key expired before the ticket, so the retry entered the player again",
					ids[0], end, kept.State, id, out, err, ids[0])
			}
		})
	}
}

// TestARetryOfARequestWhoseTicketIsGoneIsNotEnteredAgain: a retry after
// its ticket is no longer kept is answered as its request (the handler
// says NotFound, as the proto does), not entered as a second ticket: the
// request outlives its ticket. keep is scaled down to 1 s.
func TestARetryOfARequestWhoseTicketIsGoneIsNotEnteredAgain(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Control: clock.Default()}
	const keep = time.Second
	now := time.Now()
	first, out, err := st.Enter(ctx, pool, store.Ticket{Player: "p", Name: "p", Rating: 1200, Entered: now, Expires: now.Add(keep / 2)}, "r", keep, nil)
	if err != nil || out != store.Entered {
		t.Fatal(out, err)
	}
	time.Sleep(keep + 300*time.Millisecond)
	if _, err := st.Ticket(ctx, first); err == nil {
		t.Fatalf("ticket %s still kept past keep", first)
	}
	now = time.Now()
	id, out, err := st.Enter(ctx, pool, store.Ticket{Player: "p", Name: "p", Rating: 1200, Entered: now, Expires: now.Add(keep / 2)}, "r", keep, nil)
	if err != nil || out != store.Duplicate {
		t.Fatalf("retry of request \"r\" once its ticket %s is no longer kept: got %s outcome %v (0 = Entered) err %v; want Duplicate of %s (which the handler answers NotFound, as the proto says), not a second ticket", first, id, out, err, first)
	}
}

// A match's record lives PairParams.Keep from its pairing, and no less
// than its tickets. A completion or a giving up that comes after it
// expired (a try begun before, a late replica) writes no record again,
// which would have no expiry and be kept for ever: the completion is told
// the match is void, and the giving up still ends the tickets left paired
// with it (a match of an earlier release, which expired before its
// tickets), so their players may enter again.
func TestAMatchEndedAfterItExpiredIsNotWrittenAgain(t *testing.T) {
	for _, giveUp := range []bool{false, true} {
		t.Run(map[bool]string{false: "finish", true: "give up"}[giveUp], func(t *testing.T) {
			rdb, prefix := redistest.Client(t), redistest.Prefix(t)
			st := store.New(rdb, prefix)
			ctx := context.Background()
			now := time.Now()
			pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Control: clock.Default(), Rated: true}
			for _, p := range []string{"a", "b"} {
				if _, _, err := st.Enter(ctx, pool, store.Ticket{Player: p, Name: p, Rating: 1200, Entered: now, Expires: now.Add(10 * time.Minute)}, "r", 2*time.Hour, nil); err != nil {
					t.Fatal(err)
				}
			}
			res := st.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: now, BaseWindow: 100, MaxPairs: 10, Keep: time.Second})
			if res[0].Err != nil || len(res[0].Matches) != 1 {
				t.Fatalf("%+v", res)
			}
			mt := res[0].Matches[0]
			key := prefix + "mm:{p:" + pool.Tag() + "}:m:" + mt.ID
			if err := rdb.Expire(ctx, key, time.Second).Err(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1200 * time.Millisecond)
			if n, _ := rdb.Exists(ctx, key).Result(); n != 0 {
				t.Fatalf("match %s not expired", mt.ID)
			}
			if giveUp {
				if _, err := st.Void(ctx, pool, mt, time.Now(), time.Hour); err != nil {
					t.Fatal(err)
				}
				for _, id := range []string{mt.A, mt.B} {
					if tk, err := st.Ticket(ctx, id); err != nil || tk.State != store.StateExpired {
						t.Errorf("ticket %s of the match given up after it expired: %+v %v, want expired", id, tk, err)
					}
				}
			} else if _, err := st.Finish(ctx, pool, mt, "g1", store.Grant{Side: "cho"}, store.Grant{Side: "han"}, time.Now(), time.Hour, nil, 0); !errors.Is(err, store.ErrMatchVoid) {
				t.Errorf("finishing match %s after it expired: %v, want ErrMatchVoid (its game is undone)", mt.ID, err)
			}
			if n, _ := rdb.Exists(ctx, key).Result(); n != 0 {
				ttl, _ := rdb.TTL(ctx, key).Result()
				t.Fatalf("match %s, expired, written again (TTL %v): kept for ever", mt.ID, ttl)
			}
		})
	}
}

// TestAMatchOutlivedByItsTicketsLeftThemPaired: a match was kept an hour
// from its pairing (Keep), its tickets their entry's lifetime and an hour.
// After a matchmaking outage longer than the match, the replica that found
// it stalled could neither make its game nor give it up: its tickets
// stayed paired, and their players could neither cancel them nor enter
// any pool, until the tickets expired too. A match now outlives its
// tickets.
func TestAMatchOutlivedByItsTicketsLeftThemPaired(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Control: clock.Default()}
	const ttl = 10 * time.Minute
	now := time.Now()
	for _, p := range []string{"p1", "p2"} {
		if _, out, err := st.Enter(ctx, pool, store.Ticket{Player: p, Name: p, Rating: 1200, Entered: now, Expires: now.Add(ttl)}, "r", ttl+time.Hour, nil); err != nil || out != store.Entered {
			t.Fatal(out, err)
		}
	}
	res := st.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: time.Now(), BaseWindow: 100, MaxPairs: 10, Keep: time.Hour})
	if res[0].Err != nil || len(res[0].Matches) != 1 {
		t.Fatalf("pair: %+v", res[0])
	}
	m := res[0].Matches[0]
	base := prefix + "mm:{p:" + pool.Tag() + "}:"
	kept := rdb.TTL(ctx, base+"m:"+m.ID).Val()
	for _, id := range []string{m.A, m.B} {
		if left := rdb.TTL(ctx, base+"t:"+id).Val(); left > kept {
			t.Errorf("ticket %s is kept %v, its match %s only %v: found stalled after it is gone, the ticket stays paired", id, left, m.ID, kept)
		}
	}
	if seq := rdb.TTL(ctx, base+"seq").Val(); seq < 2*kept-time.Second {
		t.Errorf("the match sequence is kept %v, less than twice its match (%v)", seq, kept)
	}
}
