// Package deadline is the Redis index of instants at which a game must be
// looked at without anyone asking: a clock running out, a byo-yomi period
// ending, the Janggi setup or first-move time expiring.
//
// The index is a set of sorted sets, one per shard, each under its own
// hash tag so that it works on Redis Cluster. An entry is "<game>|<unix
// ms>" scored by that instant. The game service adds the entry for a new
// deadline BEFORE the commit that makes it current, and may remove the
// previous one after the commit; entries are never edited. So every
// current deadline has an entry (no timeout is ever lost), and an entry
// whose deadline is no longer current is stale: the sweeper asks the game
// service, which checks it against the game's state and changes nothing,
// and the entry is removed.
package deadline

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redisx"
)

// DefaultShards is the number of shards when none is configured. More
// shards spread sweeping over more replicas and cluster slots.
const DefaultShards = 16

// Index is the deadline index.
type Index struct {
	rdb    redis.UniversalClient
	prefix string
	shards int
	// Replication makes Add wait for replicas: "no timeout is ever lost"
	// must hold across a failover of the master holding the entry.
	Replication redisx.Replication
}

// New returns an index with keys "<prefix>dl:{<shard>}".
func New(rdb redis.UniversalClient, prefix string, shards int) (*Index, error) {
	if err := CheckShardCount(shards); err != nil {
		return nil, fmt.Errorf("deadline shards %w", err)
	}
	return &Index{rdb: rdb, prefix: prefix, shards: shards}, nil
}

// CheckShardCount reports whether n shards may be asked of New.
func CheckShardCount(n int) error {
	if n < 1 || n > 4096 {
		return fmt.Errorf("%d: want 1..4096", n)
	}
	return nil
}

// Shards is the number of shards.
func (x *Index) Shards() int { return x.shards }

// Prefix is the key prefix of the index's keys.
func (x *Index) Prefix() string { return x.prefix }

// ErrShardsDiffer means this process counts shards differently from the
// deployment's index.
var ErrShardsDiffer = errors.New("deadline shard count differs from the index's")

// metaKey records the shard count the index was made with.
func (x *Index) metaKey() string { return x.prefix + "dl:shards" }

// CheckShards records this index's shard count in Redis if none is, and
// otherwise requires the same: a game is found by its shard, so a game
// service and a clock service that count shards differently would leave
// deadlines in shards nobody sweeps, and no timeout there would ever be
// flagged. Every process calls it at start.
func (x *Index) CheckShards(ctx context.Context) error {
	set, err := x.rdb.SetNX(ctx, x.metaKey(), x.shards, 0).Result()
	if err != nil {
		return fmt.Errorf("record the deadline shard count in redis: %w", err)
	}
	if set {
		return nil // the first process of the deployment
	}
	recorded, err := x.rdb.Get(ctx, x.metaKey()).Result()
	if err != nil {
		return fmt.Errorf("read the deadline shard count from redis: %w", err)
	}
	if recorded != strconv.Itoa(x.shards) {
		return fmt.Errorf("%w: this process has %d, the deadlines in Redis are indexed in %s (key %s); "+
			"every game and clock process must use the same --deadline-shards, and changing it means moving the entries and that key",
			ErrShardsDiffer, x.shards, recorded, x.metaKey())
	}
	return nil
}

// ShardOf returns the shard of a game.
func (x *Index) ShardOf(gameID string) int {
	return int(crc32.ChecksumIEEE([]byte(gameID)) % uint32(x.shards))
}

// Key is the sorted set of one shard.
func (x *Index) Key(shard int) string { return x.prefix + "dl:{" + strconv.Itoa(shard) + "}" }

// Entry is one indexed deadline.
type Entry struct {
	GameID string
	At     time.Time
}

func (e Entry) member() string { return e.GameID + "|" + strconv.FormatInt(e.At.UnixMilli(), 10) }

// ParseMember reads an index member.
func ParseMember(m string) (Entry, error) {
	id, ms, ok := strings.Cut(m, "|")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || id == "" || err != nil {
		return Entry{}, fmt.Errorf("deadline entry %q is malformed", m)
	}
	return Entry{GameID: id, At: time.UnixMilli(n)}, nil
}

// Add indexes a deadline; adding one twice is harmless.
func (x *Index) Add(ctx context.Context, e Entry) error {
	key := x.Key(x.ShardOf(e.GameID))
	err := x.Replication.Write(ctx, x.rdb, key, func(c redis.Cmdable) error {
		return c.ZAdd(ctx, key, redis.Z{Score: float64(e.At.UnixMilli()), Member: e.member()}).Err()
	})
	if err != nil {
		return fmt.Errorf("index deadline of %s: %w", e.GameID, err)
	}
	return nil
}

// Remove drops an entry; removing a missing one is harmless.
func (x *Index) Remove(ctx context.Context, e Entry) error {
	key := x.Key(x.ShardOf(e.GameID))
	if err := x.rdb.ZRem(ctx, key, e.member()).Err(); err != nil {
		return fmt.Errorf("unindex deadline of %s: %w", e.GameID, err)
	}
	return nil
}

// Due returns up to limit entries of a shard whose instant is at or
// before now, earliest first.
func (x *Index) Due(ctx context.Context, shard int, now time.Time, limit int64) ([]Entry, error) {
	ms, err := x.rdb.ZRangeByScore(ctx, x.Key(shard), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10), Count: limit,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("due deadlines of shard %d: %w", shard, err)
	}
	out := make([]Entry, 0, len(ms))
	var errs []error
	for _, m := range ms {
		e, err := ParseMember(m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

// Next returns the earliest entry of a shard, if any.
func (x *Index) Next(ctx context.Context, shard int) (Entry, bool, error) {
	zs, err := x.rdb.ZRangeWithScores(ctx, x.Key(shard), 0, 0).Result()
	if err != nil {
		return Entry{}, false, fmt.Errorf("next deadline of shard %d: %w", shard, err)
	}
	if len(zs) == 0 {
		return Entry{}, false, nil
	}
	m, _ := zs[0].Member.(string)
	e, err := ParseMember(m)
	return e, err == nil, err
}

// Pending counts the entries of a shard.
func (x *Index) Pending(ctx context.Context, shard int) (int64, error) {
	n, err := x.rdb.ZCard(ctx, x.Key(shard)).Result()
	if err != nil {
		return 0, fmt.Errorf("count deadlines of shard %d: %w", shard, err)
	}
	return n, nil
}
