// Package hub fans game notifications out to the event streams of one
// process. A process holds one Redis subscription, to the notification
// shards of the games it streams, however many streams it serves. Each
// stream gets a commit's events, encoded once for all of them, or, when it
// is too slow to take them, a coalescing signal to read the game's event
// log itself, so a slow reader only delays itself. A notification without
// events sends that signal to every stream of its game.
//
// Redis drops the notifications published while a subscription is not in
// place: before the server has taken a new SUBSCRIBE, and while the
// connection is down and being restored. Each confirmation of a shard's
// subscription, the first one and every one after a reconnection,
// therefore signals the streams of that shard's games to read their logs,
// so they catch up with whatever was published before it.
package hub

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redisx"
	"github.com/palacehq/palace/pkg/server"
)

// Event is one event as streams send it: encoded once in this process for
// every stream that sends it.
type Event struct {
	Version uint64
	// Ended: the game's last event.
	Ended bool
	Msg   *server.Encoded
	// Stamp is that of the commit that made the event, After that of the
	// commit whose event it follows (the same within a commit of several
	// events): "" when not known, as for events logged before commits
	// marked them.
	Stamp, After string
}

// Decoder reads notifications: GameOf the game a notification is about
// (cheap), Events its events (only for games with subscribers here).
type Decoder struct {
	GameOf func(payload string) string
	Events func(payload string) ([]Event, error)
}

// Hub routes notifications to subscribers.
type Hub struct {
	log     *slog.Logger
	sub     *redisx.Subscription
	channel func(shard int) string
	shardOf func(id string) int
	decode  Decoder

	mu     sync.Mutex
	games  map[string]map[*Sub]struct{}
	shards map[int]int
	// shardOfChannel maps the channels wanted to their shards.
	shardOfChannel map[string]int
	closed         bool
}

// Sub is one subscriber: Events carries the events of each commit as
// published. C tells the reader to fetch what it may have missed from the
// log: it fires when Events is full (a slow reader; the events are
// dropped) and when the game's shard subscription is confirmed.
type Sub struct {
	id     string
	shard  int
	C      chan struct{}
	Events chan []Event
}

// ErrClosed is Subscribe's error once the hub is closed.
var ErrClosed = errors.New("hub closed")

// Config says which channels carry which games' notifications.
type Config struct {
	// Channel names a shard's channel; ShardOf maps a game to its shard.
	Channel func(shard int) string
	ShardOf func(id string) int
	Decode  Decoder
	// Probe is how long the subscription may be quiet before it is
	// pinged (redisx.Subscription); 0: redisx.DefaultProbe.
	Probe time.Duration
}

// New starts a hub on rdb. The hub logs what it does on its own with ctx,
// so ctx should outlive it.
func New(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger, cfg Config) *Hub {
	h := &Hub{
		log: log, channel: cfg.Channel, shardOf: cfg.ShardOf, decode: cfg.Decode,
		games:          map[string]map[*Sub]struct{}{},
		shards:         map[int]int{},
		shardOfChannel: map[string]int{},
	}
	// The subscription's goroutines serve no request, and notifications
	// carry no trace of their commit: New's context is the only one they
	// have.
	h.sub = redisx.Subscribe(ctx, rdb, log, redisx.SubscriptionConfig{
		Message:    func(ctx context.Context, m *redis.Message) { h.notify(ctx, m.Payload) },
		Subscribed: func(_ context.Context, channel string) { h.subscribed(channel) },
		Probe:      cfg.Probe,
	})
	return h
}

// notify hands one notification's events to the streams of its game.
func (h *Hub) notify(ctx context.Context, payload string) {
	id := h.decode.GameOf(payload)
	h.mu.Lock()
	watched := len(h.games[id]) > 0
	h.mu.Unlock()
	if !watched {
		// A game of the shard that nobody here watches.
		return
	}
	evs, err := h.decode.Events(payload)
	if err != nil {
		h.log.WarnContext(ctx, "notification", "game", id, "err", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.games[id] {
		// A notification without events asks the streams to read the log.
		if err == nil && len(evs) > 0 {
			select {
			case s.Events <- evs:
				continue
			default:
			}
		}
		signal(s)
	}
}

// subscribed tells the streams of a shard's games, once its subscription
// is confirmed, to read what may have been published before.
func (h *Hub) subscribed(channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	shard, ok := h.shardOfChannel[channel]
	if !ok {
		return
	}
	for _, subs := range h.games {
		for s := range subs {
			if s.shard == shard {
				signal(s)
			}
		}
	}
}

func signal(s *Sub) {
	select {
	case s.C <- struct{}{}:
	default: // already signalled: the reader will see everything anyway
	}
}

// Subscribe signals the returned Sub on every notification of game id.
// It does not wait for Redis: the first confirmation of the shard's
// subscription signals the Sub to read what was published before it.
func (h *Hub) Subscribe(ctx context.Context, id string) (*Sub, error) {
	shard := h.shardOf(id)
	s := &Sub{id: id, shard: shard, C: make(chan struct{}, 1), Events: make(chan []Event, 64)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if h.games[id] == nil {
		h.games[id] = map[*Sub]struct{}{}
	}
	h.games[id][s] = struct{}{}
	h.shards[shard]++
	if h.shards[shard] == 1 {
		h.shardOfChannel[h.channel(shard)] = shard
		h.sub.Want(h.channel(shard))
	}
	return s, nil
}

// Unsubscribe stops signalling s.
func (h *Hub) Unsubscribe(ctx context.Context, s *Sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	subs := h.games[s.id]
	if _, ok := subs[s]; !ok {
		return
	}
	delete(subs, s)
	if len(subs) == 0 {
		delete(h.games, s.id)
	}
	h.shards[s.shard]--
	if h.shards[s.shard] == 0 {
		delete(h.shards, s.shard)
		delete(h.shardOfChannel, h.channel(s.shard))
		h.sub.Unwant(h.channel(s.shard))
	}
}

// Subscribers counts the subscribers, for metrics.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, subs := range h.games {
		n += len(subs)
	}
	return n
}

// Close ends the subscription.
func (h *Hub) Close() error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	return h.sub.Close()
}
