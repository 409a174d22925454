// Package aijobs is the Redis queue of "AI to move" jobs: the game service
// adds one whenever an AI seat has to move or choose a formation, and any
// number of AI workers take them through a consumer group. A job whose
// worker dies stays pending and is claimed by another worker after a
// timeout; the game service's request ids make the retried job commit at
// most one move.
package aijobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redisx"
)

// Kind says what the AI has to do.
type Kind string

const (
	KindMove      Kind = "move"
	KindFormation Kind = "formation"
)

// Job is one AI turn.
type Job struct {
	GameID string `json:"g"`
	// Version is the game's version once the AI is to act; a worker that
	// finds the game older waits, newer means the job is done or stale.
	Version uint64 `json:"v"`
	Kind    Kind   `json:"k"`
	// Side is "first" or "second"; Token is that seat's credential.
	Side       string `json:"s"`
	Token      string `json:"t"`
	Level      int    `json:"l"`
	EnqueuedMs int64  `json:"at"`
}

// Delivery is a job handed to one worker.
type Delivery struct {
	ID  string
	Job Job
	// Attempt is 1 for a first delivery, more when claimed from a worker
	// that did not finish it.
	Attempt int64
}

// Queue is the job stream and its consumer group. All keys share the
// hash tag {ai}.
type Queue struct {
	rdb   redis.UniversalClient
	key   string
	group string
	// ClaimAfter is how long a job may stay unacknowledged before another
	// worker takes it over.
	ClaimAfter time.Duration
	// Replication makes Enqueue wait for replicas, so that a failover of
	// the queue's master cannot strand a game on the AI's turn.
	Replication redisx.Replication
}

// New returns the queue under prefix.
func New(rdb redis.UniversalClient, prefix string) *Queue {
	return &Queue{rdb: rdb, key: prefix + "{ai}:jobs", group: "workers", ClaimAfter: 30 * time.Second}
}

// Ensure creates the stream and group if needed.
func (q *Queue) Ensure(ctx context.Context) error {
	err := q.rdb.XGroupCreateMkStream(ctx, q.key, q.group, "0").Err()
	if err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("ai queue group: %w", err)
	}
	return nil
}

// Enqueue adds a job.
func (q *Queue) Enqueue(ctx context.Context, j Job) error {
	b, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("encode ai job: %w", err)
	}
	err = q.Replication.Write(ctx, q.rdb, q.key, func(c redis.Cmdable) error {
		return c.XAdd(ctx, &redis.XAddArgs{Stream: q.key, Values: []any{"j", b}}).Err()
	})
	if err != nil {
		return fmt.Errorf("enqueue ai job for %s: %w", j.GameID, err)
	}
	return nil
}

// Next returns the next job for consumer: first one abandoned by another
// worker, else a new one, waiting up to block. It returns nil, nil when
// nothing came.
func (q *Queue) Next(ctx context.Context, consumer string, block time.Duration) (*Delivery, error) {
	msgs, _, err := q.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream: q.key, Group: q.group, Consumer: consumer, MinIdle: q.ClaimAfter, Start: "0-0", Count: 1,
	}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("claim ai job: %w", err)
	}
	if len(msgs) > 0 {
		d, err := decode(msgs[0])
		if err != nil {
			return nil, err
		}
		d.Attempt = 2
		return d, nil
	}
	streams, err := q.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: q.group, Consumer: consumer, Streams: []string{q.key, ">"}, Count: 1, Block: block,
	}).Result()
	if errors.Is(err, redis.Nil) || (err != nil && ctx.Err() != nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ai job: %w", err)
	}
	for _, s := range streams {
		for _, m := range s.Messages {
			d, err := decode(m)
			if err != nil {
				return nil, err
			}
			d.Attempt = 1
			return d, nil
		}
	}
	return nil, nil
}

func decode(m redis.XMessage) (*Delivery, error) {
	raw, _ := m.Values["j"].(string)
	var j Job
	if err := json.Unmarshal([]byte(raw), &j); err != nil {
		return nil, fmt.Errorf("decode ai job %s: %w", m.ID, err)
	}
	return &Delivery{ID: m.ID, Job: j}, nil
}

// Done acknowledges and deletes a job.
func (q *Queue) Done(ctx context.Context, d *Delivery) error {
	pipe := q.rdb.TxPipeline()
	pipe.XAck(ctx, q.key, q.group, d.ID)
	pipe.XDel(ctx, q.key, d.ID)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("ack ai job %s: %w", d.ID, err)
	}
	return nil
}

// Depth counts the jobs waiting or in progress.
func (q *Queue) Depth(ctx context.Context) (int64, error) {
	n, err := q.rdb.XLen(ctx, q.key).Result()
	if err != nil {
		return 0, fmt.Errorf("ai queue depth: %w", err)
	}
	return n, nil
}
