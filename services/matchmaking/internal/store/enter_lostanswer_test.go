package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/redisx"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// TestAnEntryWhoseScriptAnswerIsLostWaits: the process's Redis client
// (redisx.New: go-redis' default retries) sends enter.lua again when the
// connection breaks after Redis ran it. The second run answers "dup", which
// Enter took for another attempt's ticket: it answered the entry as made
// but never let the ticket wait (activate.lua), and put the player's
// live-ticket record back, so that the player, told WAITING, was never
// paired, the ticket reading EXPIRED after twice the claim grace.
func TestAnEntryWhoseScriptAnswerIsLostWaits(t *testing.T) {
	ctx := context.Background()
	direct, prefix := redistest.Client(t), redistest.Prefix(t)
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	rdb, err := redisx.New(ctx, proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Control: clock.Default()}
	requestKey := prefix + "mm:{p:" + pool.Tag() + "}:r:p:r1"
	// The scripts in Redis' cache, so that the answer lost is of the
	// entry's run, not of a NOSCRIPT refusal: an entry to another pool
	// first.
	other := store.New(direct, prefix)
	janggi := store.Pool{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Control: clock.Default()}
	w := store.Ticket{Player: "w", Name: "w", Rating: 1200, Entered: time.Now(), Expires: time.Now().Add(time.Hour)}
	if _, out, err := other.Enter(ctx, janggi, w, "rw", 2*time.Hour, nil); err != nil || out != store.Entered {
		t.Fatal(out, err)
	}
	rdb.AddHook(&redistest.LoseFirstAnswer{
		Proxy: proxy,
		Match: func(args []any) bool {
			// enter.lua: five keys, the fifth the request's.
			return len(args) > 7 && fmt.Sprint(args[2]) == "5" && args[7] == requestKey
		},
		Landed: func() bool { return direct.Exists(ctx, requestKey).Val() == 1 },
	})
	st := store.New(rdb, prefix)
	now := time.Now()
	tk := store.Ticket{Player: "p", Name: "p", Rating: 1200, Entered: now, Expires: now.Add(time.Hour)}
	id, out, err := st.Enter(ctx, pool, tk, "r1", 2*time.Hour, nil)
	if err != nil {
		t.Logf("Enter failed (%v): a lost answer reported as an error is the fine outcome", err)
		return
	}
	t.Logf("Enter answered ticket %s, outcome %v", id, out)
	state := direct.HGet(ctx, prefix+"mm:{p:"+pool.Tag()+"}:t:"+id, "state").Val()
	_, inQueue := direct.ZScore(ctx, prefix+"mm:{p:"+pool.Tag()+"}:q", id).Result()
	live := direct.Get(ctx, prefix+"mm:{u:p}:live").Val()
	// Another player enters; a pairing pass should pair the two.
	tq := store.Ticket{Player: "q", Name: "q", Rating: 1200, Entered: time.Now(), Expires: time.Now().Add(time.Hour)}
	if _, out, err := other.Enter(ctx, pool, tq, "r1", 2*time.Hour, nil); err != nil || out != store.Entered {
		t.Fatal(out, err)
	}
	res := other.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: time.Now(), BaseWindow: 1000, MaxPairs: 10, Keep: time.Hour})
	if out != store.Entered || state != store.StateWaiting || inQueue != nil || !strings.HasPrefix(live, id+"|") {
		t.Fatalf("the entry was answered with ticket %s (outcome %v), but the ticket is %q, in the queue: %v, live record %q", id, out, state, inQueue == nil, live)
	}
	if res[0].Err != nil || len(res[0].Matches) != 1 {
		t.Fatalf("a pairing pass with p's ticket and another player's: %d matches (%v); want them paired", len(res[0].Matches), res[0].Err)
	}
}
