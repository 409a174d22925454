package sweep

import (
	"sync/atomic"
	"time"
)

// latenessBoundsMs are the upper bounds of the lateness buckets, in
// milliseconds; a last bucket without bound follows them. They are fine
// where the target is (tens of milliseconds) and coarse up to the
// seconds a lost replica may cost.
var latenessBoundsMs = [...]float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000}

// histogram counts observations per bucket of latenessBoundsMs; safe for
// concurrent use without locks.
type histogram struct {
	counts []atomic.Uint64
}

func newHistogram() *histogram {
	return &histogram{counts: make([]atomic.Uint64, len(latenessBoundsMs)+1)}
}

func (h *histogram) observe(ms float64) {
	i := 0
	for i < len(latenessBoundsMs) && ms > latenessBoundsMs[i] {
		i++
	}
	h.counts[i].Add(1)
}

// Bucket is one bucket of a histogram: the observations in (the previous
// bound, LeMs]; LeMs 0 is the last, unbounded bucket.
type Bucket struct {
	LeMs  float64
	Count uint64
}

func (h *histogram) buckets() []Bucket {
	out := make([]Bucket, len(h.counts))
	for i := range h.counts {
		if i < len(latenessBoundsMs) {
			out[i].LeMs = latenessBoundsMs[i]
		}
		out[i].Count = h.counts[i].Load()
	}
	return out
}

// health is what one shard's sweeper did in this replica.
type health struct {
	lastSweepMs atomic.Int64
	expired     atomic.Uint64
	errors      atomic.Uint64
	stale       atomic.Uint64
	pending     atomic.Int64
}

// Stats describe the index and this replica's sweepers.
type Stats struct {
	ReplicaID string
	// Replicas seen recently, this one included.
	Replicas []string
	Shards   []ShardStats
	// Lateness of the flags this replica committed.
	Lateness []Bucket
	// Sweepers of the shards this replica holds or has swept.
	Sweepers []SweeperStats
}

// ShardStats is one shard of the index.
type ShardStats struct {
	Shard   int
	Pending int64
	// Owner holds the shard's lease; empty when nobody does.
	Owner string
}

// SweeperStats is one shard's sweeper in this replica.
type SweeperStats struct {
	Shard                  int
	LastSweep              time.Time
	Expired, Errors, Stale uint64
	Owned                  bool
}
