package store_test

import (
	"context"
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
