package deadline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/redisx"
)

func TestIndexAgainstRealRedis(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	x, err := New(rdb, redistest.Prefix(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for s := range 4 {
			rdb.Del(ctx, x.Key(s))
		}
	})
	base := time.UnixMilli(1_900_000_000_000)
	entries := []Entry{
		{GameID: "a", At: base.Add(3 * time.Second)},
		{GameID: "b", At: base.Add(1 * time.Second)},
		{GameID: "c", At: base.Add(2 * time.Second)},
		{GameID: "a", At: base.Add(5 * time.Second)},
	}
	for _, e := range entries {
		if err := x.Add(ctx, e); err != nil {
			t.Fatal(err)
		}
		if err := x.Add(ctx, e); err != nil { // twice is harmless
			t.Fatal(err)
		}
	}
	var due []Entry
	var total int64
	for s := range x.Shards() {
		d, err := x.Due(ctx, s, base.Add(3*time.Second), 100)
		if err != nil {
			t.Fatal(err)
		}
		due = append(due, d...)
		n, _ := x.Pending(ctx, s)
		total += n
	}
	if len(due) != 3 || total != 4 {
		t.Fatalf("due %v (want 3 entries), pending %d (want 4)", due, total)
	}
	for _, e := range due {
		if e.At.After(base.Add(3 * time.Second)) {
			t.Fatalf("entry %v is not due", e)
		}
		if err := x.Remove(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	s := x.ShardOf("a")
	next, ok, err := x.Next(ctx, s)
	if err != nil || !ok || next.GameID != "a" || !next.At.Equal(base.Add(5*time.Second)) {
		t.Fatalf("next = %v %v %v, want a at +5s", next, ok, err)
	}
}

func TestParseMember(t *testing.T) {
	for _, bad := range []string{"", "x", "|5", "g|", "g|x"} {
		if _, err := ParseMember(bad); err == nil {
			t.Errorf("ParseMember(%q) accepted", bad)
		}
	}
	e, err := ParseMember("g1|1234")
	if err != nil || e.GameID != "g1" || e.At.UnixMilli() != 1234 {
		t.Fatalf("got %v %v", e, err)
	}
}

func TestNewRejectsBadShardCount(t *testing.T) {
	if _, err := New(nil, "", 0); err == nil {
		t.Fatal("accepted 0 shards")
	}
}

// With Replication, an entry is added only once a replica holds it: a
// failover cannot lose a deadline that a commit relies on.
func TestAddWaitsForReplicas(t *testing.T) {
	ctx := context.Background()
	pair := redistest.NewPair(t)
	onReplica := pair.Replica.Client(t)
	x, err := New(pair.Master.Client(t), "", 4)
	if err != nil {
		t.Fatal(err)
	}
	x.Replication = redisx.Replication{Replicas: 1, Timeout: time.Second}
	e := Entry{GameID: "g1", At: time.UnixMilli(1_700_000_000_000)}
	if err := x.Add(ctx, e); err != nil {
		t.Fatalf("add with the replica linked: %v", err)
	}
	if n, err := onReplica.ZCard(ctx, x.Key(x.ShardOf(e.GameID))).Result(); err != nil || n != 1 {
		t.Fatalf("replica holds %d entries (%v) once the add returned, want 1", n, err)
	}
	pair.Link.Blackhole()
	if err := x.Add(ctx, Entry{GameID: "g2", At: e.At}); !errors.Is(err, redisx.ErrNotReplicated) {
		t.Fatalf("add with the replica behind: %v, want ErrNotReplicated", err)
	}
}

// TestCheckShardsKeepsEveryoneOnOneCount: the first process records its
// shard count; a later one with the same count starts, one with another
// is refused, since the deadlines it indexes would be swept by nobody.
func TestCheckShardsKeepsEveryoneOnOneCount(t *testing.T) {
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	for _, shards := range []int{16, 16} {
		x, err := New(rdb, prefix, shards)
		if err != nil {
			t.Fatal(err)
		}
		if err := x.CheckShards(ctx); err != nil {
			t.Fatalf("%d shards, as recorded: %v", shards, err)
		}
	}
	other, err := New(rdb, prefix, 32)
	if err != nil {
		t.Fatal(err)
	}
	err = other.CheckShards(ctx)
	if !errors.Is(err, ErrShardsDiffer) || !strings.Contains(err.Error(), "this process has 32") || !strings.Contains(err.Error(), "indexed in 16") {
		t.Fatalf("32 shards where 16 are recorded: %v", err)
	}
}

// TestShardOfSpreadsOverEveryShard: a game's shard is one the sweeper
// reads (0..shards-1), and games spread over all of them.
func TestShardOfSpreadsOverEveryShard(t *testing.T) {
	x, err := New(nil, "", 16)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for i := range 1000 {
		s := x.ShardOf(fmt.Sprintf("g%d", i))
		if s < 0 || s >= x.Shards() {
			t.Fatalf("game g%d in shard %d of %d", i, s, x.Shards())
		}
		seen[s] = true
	}
	if len(seen) != x.Shards() {
		t.Fatalf("1000 games fill %d of %d shards", len(seen), x.Shards())
	}
	if _, err := New(nil, "", 4096); err != nil {
		t.Errorf("4096 shards: %v", err)
	}
	if _, err := New(nil, "", 4097); err == nil {
		t.Error("accepted 4097 shards")
	}
}

// TestDueAndNextWithinAShard: Due keeps to its limit, earliest first, and
// reports a malformed member while returning the others; Next is the
// earliest entry.
func TestDueAndNextWithinAShard(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	x, err := New(rdb, redistest.Prefix(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(ctx, x.Key(0)) })
	base := time.UnixMilli(1_900_000_000_000)
	for i, id := range []string{"c", "a", "b"} {
		if err := x.Add(ctx, Entry{GameID: id, At: base.Add(time.Duration(3-i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	next, ok, err := x.Next(ctx, 0)
	if err != nil || !ok || next.GameID != "b" || !next.At.Equal(base.Add(time.Second)) {
		t.Fatalf("next = %v %v %v, want b at +1s", next, ok, err)
	}
	due, err := x.Due(ctx, 0, base.Add(time.Minute), 2)
	if err != nil || len(due) != 2 || due[0].GameID != "b" || due[1].GameID != "a" {
		t.Fatalf("due with limit 2 = %v (%v), want b then a", due, err)
	}
	if err := rdb.ZAdd(ctx, x.Key(0), redis.Z{Score: float64(base.UnixMilli()), Member: "broken"}).Err(); err != nil {
		t.Fatal(err)
	}
	due, err = x.Due(ctx, 0, base.Add(time.Minute), 10)
	if err == nil || len(due) != 3 {
		t.Fatalf("due with a malformed member = %v (%v), want the 3 others and an error", due, err)
	}
	if _, ok, err := x.Next(ctx, 0); ok || err == nil {
		t.Fatalf("next is a malformed member: ok %v, err %v; want not ok and an error", ok, err)
	}
}

// The recorded shard count does not expire: a process started later with
// another count must still be refused.
func TestCheckShardsRecordsForGood(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	x, err := New(rdb, redistest.Prefix(t), 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.CheckShards(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(ctx, x.metaKey()) })
	if ttl, err := rdb.TTL(ctx, x.metaKey()).Result(); err != nil || ttl != -1 {
		t.Fatalf("the shard count's key has TTL %v (%v), want none", ttl, err)
	}
}
