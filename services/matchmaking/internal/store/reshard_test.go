package store_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/clock"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// TestPairingWhileThePoolsSlotMoves: an operator reshards the cluster
// while players wait. A pairing pass names keys of its own (the tickets it
// reads, the match it makes), which during the move may be on either
// master: the pass must change nothing rather than stop midway, leaving two
// tickets paired with no match made (nobody would ever make their game, and
// neither player could enter the pool again), or take tickets whose
// records have not moved yet for gone. Once the slot has moved, they pair.
func TestPairingWhileThePoolsSlotMoves(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 2)
	rdb := cl.Client(t)
	prefix := redistest.Prefix(t)
	st := store.New(rdb, prefix)
	pool := store.Pool{Kind: janggi, Control: clock.Default()}
	now := time.Now()
	params := store.PairParams{Now: now, BaseWindow: 100, WidenPerSecond: 0, MaxPairs: 100, Keep: time.Hour}
	enter := func(player string, rating int) string {
		t.Helper()
		id, _, err := st.Enter(ctx, pool, store.Ticket{Player: player, Name: player, Rating: rating, Entered: now, Expires: now.Add(time.Hour)}, "r-"+player, time.Hour, nil)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	pair := func() ([]store.Match, error) {
		res := st.Pair(ctx, []store.Pool{pool}, params)
		return res[0].Matches, res[0].Err
	}
	// A first match, whose game is still being made: the pool's keys all
	// exist, so the pass runs where they are.
	enter("a", 1200)
	enter("b", 1200)
	if ms, err := pair(); err != nil || len(ms) != 1 {
		t.Fatalf("first pass: %v, %v", ms, err)
	}
	c, d := enter("c", 1500), enter("d", 1500)

	base := prefix + "mm:{p:" + pool.Tag() + "}:"
	slot, err := rdb.ClusterKeySlot(ctx, base+"q").Result()
	if err != nil {
		t.Fatal(err)
	}
	master, err := rdb.MasterForKey(ctx, base+"q")
	if err != nil {
		t.Fatal(err)
	}
	src, dst := cl.Nodes[0], cl.Nodes[1]
	if master.Options().Addr != src.Addr {
		src, dst = dst, src
	}
	srcc := redis.NewClient(&redis.Options{Addr: src.Addr})
	dstc := redis.NewClient(&redis.Options{Addr: dst.Addr})
	t.Cleanup(func() { _ = srcc.Close(); _ = dstc.Close() })
	srcID, _ := srcc.ClusterMyID(ctx).Result()
	dstID, _ := dstc.ClusterMyID(ctx).Result()
	do := func(c *redis.Client, args ...any) {
		t.Helper()
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%s %v: %v", c.Options().Addr, args, err)
		}
	}
	host, port, _ := net.SplitHostPort(dst.Addr)
	migrate := func(keys []string) {
		t.Helper()
		if len(keys) > 0 {
			do(srcc, append([]any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}, toAny(keys)...)...)
		}
	}
	do(dstc, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
	do(srcc, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)

	// Nothing has moved yet: the match to be made is a key this master
	// lacks, and would refuse midway.
	if ms, _ := pair(); len(ms) != 0 {
		t.Errorf("a pass while the slot moves made %v", ms)
	}
	// Everything but c's and d's tickets has moved: the pass runs on the
	// new master, which has no record of them yet.
	keys, err := srcc.ClusterGetKeysInSlot(ctx, int(slot), 1000).Result()
	if err != nil {
		t.Fatal(err)
	}
	tickets := []string{base + "t:" + c, base + "t:" + d}
	migrate(slices.DeleteFunc(keys, func(k string) bool { return slices.Contains(tickets, k) }))
	if ms, _ := pair(); len(ms) != 0 {
		t.Errorf("a pass while the slot moves made %v", ms)
	}
	migrate(tickets)
	for _, c := range []*redis.Client{dstc, srcc} {
		do(c, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
	}

	for _, id := range []string{c, d} {
		tk, err := st.Ticket(ctx, id)
		if err != nil || tk.State != "waiting" {
			t.Errorf("ticket %s once the slot moved: %+v, %v; want it waiting", id, tk, err)
		}
	}
	ms, err := pair()
	if err != nil || len(ms) != 1 || fmt.Sprint(sorted(ms[0].A, ms[0].B)) != fmt.Sprint(sorted(c, d)) {
		t.Fatalf("pass once the slot moved: %+v, %v; want %s and %s paired", ms, err, c, d)
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func sorted(ss ...string) string {
	slices.Sort(ss)
	return strings.Join(ss, ",")
}

// TestAPassReportsEveryMatchWhenOneMasterLostItsScripts: on a Redis
// Cluster, one master lacks the pairing script (restarted, or a replica
// promoted by a failover) while another has it. A pass over two pools, one
// on each master, runs its scripts in one pipeline: the other master's
// pool is paired, this one's answers NOSCRIPT. Every match made must be
// reported by the pass, or nobody starts its game until a stall recovery.
func TestAPassReportsEveryMatchWhenOneMasterLostItsScripts(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 2)
	rdb := cl.Client(t)
	prefix := redistest.Prefix(t)
	st := store.New(rdb, prefix)
	now := time.Now()
	params := store.PairParams{Now: now, BaseWindow: 100, MaxPairs: 100, Keep: time.Hour}

	// Two pools whose keys live on different masters.
	masterOf := func(p store.Pool) string {
		t.Helper()
		m, err := rdb.MasterForKey(ctx, prefix+"mm:{p:"+p.Tag()+"}:q")
		if err != nil {
			t.Fatal(err)
		}
		return m.Options().Addr
	}
	first := store.Pool{Kind: janggi, Control: clock.Default()}
	var second store.Pool
	for m := 1; ; m++ {
		p := store.Pool{Kind: janggi, Control: clock.Control{Kind: clock.Fischer, MainTime: time.Duration(m) * time.Minute, Increment: time.Second}}
		if masterOf(p) != masterOf(first) {
			second = p
			break
		}
	}
	pools := []store.Pool{first, second}
	// A first pass loads the script on every master.
	for _, r := range st.Pair(ctx, pools, params) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	var tickets []string
	for i, p := range pools {
		for j := range 2 {
			player := fmt.Sprintf("p%d-%d", i, j)
			id, out, err := st.Enter(ctx, p, store.Ticket{Player: player, Name: player, Rating: 1200, Entered: now, Expires: now.Add(time.Hour)}, "r", time.Hour, nil)
			if err != nil || out != store.Entered {
				t.Fatal(out, err)
			}
			tickets = append(tickets, id)
		}
	}
	// The second pool's master forgets its scripts (restart, failover).
	node := redis.NewClient(&redis.Options{Addr: masterOf(second)})
	t.Cleanup(func() { _ = node.Close() })
	if err := node.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	reported := map[string]bool{}
	for _, r := range st.Pair(ctx, pools, params) {
		if r.Err != nil {
			t.Fatalf("pool %s: %v", r.Pool.ID(), r.Err)
		}
		for _, m := range r.Matches {
			reported[m.A], reported[m.B] = true, true
		}
	}
	for _, id := range tickets {
		tk, err := st.Ticket(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if tk.State == store.StatePaired && !reported[id] {
			t.Errorf("ticket %s (pool %s) was paired into match %s by the pass, which did not report the match: its game is not started", id, tk.Pool, tk.Match)
		}
	}
}
