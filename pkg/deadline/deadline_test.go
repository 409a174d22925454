package deadline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

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
