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
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/server"
)

// Event is one event as streams send it: encoded once in this process for
// every stream that sends it.
type Event struct {
	Version uint64
	// Ended: the game's last event.
	Ended bool
	Msg   *server.Encoded
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
	rdb     redis.UniversalClient
	channel func(shard int) string
	shardOf func(id string) int
	decode  Decoder
	probe   time.Duration

	mu     sync.Mutex
	games  map[string]map[*Sub]struct{}
	shards map[int]int
	// shardOfChannel maps the channels wanted to their shards.
	shardOfChannel map[string]int
	closed         bool

	// ps is the subscription, replaced when it goes silent; heard is when
	// it last said anything (UnixNano).
	psMu  sync.Mutex
	ps    *redis.PubSub
	heard atomic.Int64

	// changed wakes keep when the channels wanted change.
	changed chan struct{}
	stop    chan struct{}
	// kept and received close as keep and receive end.
	kept, received chan struct{}
	// replacedAt is heard as the last replacement set it (keep's own).
	replacedAt int64
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

// DefaultProbe is how long the subscription may be quiet before it is
// pinged.
const DefaultProbe = 2 * time.Second

// Config says which channels carry which games' notifications.
type Config struct {
	// Channel names a shard's channel; ShardOf maps a game to its shard.
	Channel func(shard int) string
	ShardOf func(id string) int
	Decode  Decoder
	// Probe is how long the subscription may be quiet before it is
	// pinged; quiet for two more, it is taken for lost (a connection
	// that died without closing: a partition, a master replaced behind
	// its address) and replaced. 0: DefaultProbe.
	Probe time.Duration
}

// New starts a hub on rdb. The hub logs what it does on its own with ctx,
// so ctx should outlive it.
func New(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger, cfg Config) *Hub {
	if cfg.Probe <= 0 {
		cfg.Probe = DefaultProbe
	}
	h := &Hub{
		log: log, rdb: rdb, channel: cfg.Channel, shardOf: cfg.ShardOf, decode: cfg.Decode, probe: cfg.Probe,
		ps:             rdb.Subscribe(ctx),
		games:          map[string]map[*Sub]struct{}{},
		shards:         map[int]int{},
		shardOfChannel: map[string]int{},
		changed:        make(chan struct{}, 1),
		stop:           make(chan struct{}),
		kept:           make(chan struct{}),
		received:       make(chan struct{}),
	}
	h.heard.Store(time.Now().UnixNano())
	// The hub's goroutines serve no request, and notifications carry no
	// trace of their commit: New's context is the only one they have.
	go h.receive(ctx)
	go h.keep(ctx)
	return h
}

func (h *Hub) current() *redis.PubSub {
	h.psMu.Lock()
	defer h.psMu.Unlock()
	return h.ps
}

// receive reads the subscription, the current one after a replacement.
func (h *Hub) receive(ctx context.Context) {
	defer close(h.received)
	backoff := time.Duration(0)
	for {
		ps := h.current()
		m, err := ps.ReceiveTimeout(ctx, h.probe)
		if h.stopped() {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, redis.ErrClosed) {
				// Quiet, or replaced: keep has it in hand.
				backoff = 0
				continue
			}
			// go-redis dials again on the next receive; a Redis that
			// refuses connections is not dialled in a tight loop.
			backoff = min(max(2*backoff, 50*time.Millisecond), time.Second)
			select {
			case <-h.stop:
				return
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		if ps == h.current() {
			h.heard.Store(time.Now().UnixNano())
		}
		switch m := m.(type) {
		case *redis.Message:
			h.notify(ctx, m.Payload)
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				h.subscribed(m.Channel)
			}
		}
	}
}

// keep brings the subscription to the channels wanted, outside h.mu so
// that no stream waits on Redis to start or end, and replaces it when it
// goes silent.
func (h *Hub) keep(ctx context.Context) {
	defer close(h.kept)
	tick := time.NewTicker(h.probe)
	defer tick.Stop()
	// subscribed holds the channels sent to the current subscription.
	// go-redis keeps a channel even when its SUBSCRIBE fails, and
	// subscribes it again on the connection it dials next.
	subscribed := map[string]bool{}
	for {
		select {
		case <-h.stop:
			return
		case <-h.changed:
		case <-tick.C:
			if h.probeQuiet(ctx) {
				clear(subscribed)
			}
		}
		want := h.wanted()
		var add, drop []string
		for c := range want {
			if !subscribed[c] {
				add = append(add, c)
			}
		}
		for c := range subscribed {
			if !want[c] {
				drop = append(drop, c)
			}
		}
		ps := h.current()
		if len(add) > 0 {
			if err := ps.Subscribe(ctx, add...); err != nil {
				h.log.DebugContext(ctx, "subscribe", "channels", len(add), "err", err)
			}
			for _, c := range add {
				subscribed[c] = true
			}
		}
		if len(drop) > 0 {
			// A failed UNSUBSCRIBE does no harm: go-redis forgets the
			// channels before it sends it, and a connection it dials
			// again subscribes only those it still holds. After a Redis
			// restart every shard's last stream would warn here.
			if err := ps.Unsubscribe(ctx, drop...); err != nil {
				h.log.DebugContext(ctx, "unsubscribe", "channels", len(drop), "err", err)
			}
			for _, c := range drop {
				delete(subscribed, c)
			}
		}
	}
}

// probeQuiet pings a subscription quiet for a probe, and replaces one
// quiet for three (a ping every probe unanswered); it reports a
// replacement, whose subscriptions are to be made again.
func (h *Hub) probeQuiet(ctx context.Context) bool {
	quiet := time.Since(time.Unix(0, h.heard.Load()))
	if quiet < h.probe {
		return false
	}
	if quiet < 3*h.probe {
		if err := h.current().Ping(ctx); err != nil {
			h.log.DebugContext(ctx, "subscription ping", "err", err)
		}
		return false
	}
	// Warned once an outage: a Redis out of reach has every new
	// subscription replaced in turn, silent as the first.
	level := slog.LevelWarn
	if h.heard.Load() == h.replacedAt {
		level = slog.LevelDebug
	}
	h.log.Log(ctx, level, "event subscription silent: replaced by a new connection", "quiet", quiet.Round(time.Millisecond))
	fresh := h.rdb.Subscribe(ctx)
	h.psMu.Lock()
	old := h.ps
	h.ps = fresh
	h.psMu.Unlock()
	h.replacedAt = time.Now().UnixNano()
	h.heard.Store(h.replacedAt)
	_ = old.Close()
	return true
}

// wanted is the set of channels of the shards with subscribers.
func (h *Hub) wanted() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	want := make(map[string]bool, len(h.shardOfChannel))
	for c := range h.shardOfChannel {
		want[c] = true
	}
	return want
}

func (h *Hub) stopped() bool {
	select {
	case <-h.stop:
		return true
	default:
		return false
	}
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
		h.change()
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
		h.change()
	}
}

func (h *Hub) change() {
	select {
	case h.changed <- struct{}{}:
	default: // keep will read the latest set anyway
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
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	close(h.stop)
	<-h.kept // keep replaces the subscription: not any more
	err := h.current().Close()
	<-h.received
	return err
}
