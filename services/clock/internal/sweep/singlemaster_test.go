package sweep

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/redisx"
)

// TestASingleMasterClusterBehindAnUnannouncedAddressIsSwept: redisx.New
// reaches a Redis Cluster of one master at an address it does not announce
// (TestASingleMasterClusterBehindAnAddressItDoesNotAnnounceStarts). It
// handed back a plain client, which the sweeper took for a single Redis:
// it read, and renewed the leases of, several shards in one script or one
// MULTI, keys of several hash slots, which a cluster node refuses
// (CROSSSLOT) though it serves every slot. No due deadline was read, no
// lease renewed, and no game flagged on time.
func TestASingleMasterClusterBehindAnUnannouncedAddressIsSwept(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 1)
	redistest.AnnounceElsewhere(t, cl.Nodes[0])
	rdb, err := redisx.New(ctx, cl.Nodes[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()

	prefix := redistest.Prefix(t)
	now := time.Now().UnixMilli()
	shardKeys := []string{prefix + "dl:{0}", prefix + "dl:{1}", prefix + "dl:{2}"}
	for i, k := range shardKeys {
		if err := rdb.ZAdd(ctx, k, redis.Z{Score: float64(now - 1000), Member: "game" + strconv.Itoa(i)}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	due, errs := fetchDueMany(ctx, rdb, shardKeys, []int{10, 10, 10})
	for i := range shardKeys {
		if errs[i] != nil || len(due[i].members) != 1 {
			t.Errorf("shard %d: due %v, error %v; want its one due deadline", i, due[i].members, errs[i])
		}
	}

	k := keys{prefix: prefix}
	shards := []int{0, 1, 2}
	for _, sh := range shards {
		if err := rdb.Set(ctx, k.lease(sh), "me", time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	pipe := rdb.Pipeline()
	renewed := queueRenewals(ctx, pipe, rdb, k, shards, "me", 60_000)
	_, _ = pipe.Exec(ctx)
	for i, sh := range shards {
		if got, err := renewed(i); err != nil || got != 1 {
			t.Errorf("lease of shard %d held by this replica: renewed %d, error %v; want renewed", sh, got, err)
		}
	}
}
