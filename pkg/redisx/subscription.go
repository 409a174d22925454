package redisx

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultProbe is how long a Subscription may be quiet before it is
// pinged.
const DefaultProbe = 2 * time.Second

// SubscriptionConfig says what a Subscription does with what it hears.
type SubscriptionConfig struct {
	// Message is given each message, on the subscription's one receiving
	// goroutine, in the order received.
	Message func(ctx context.Context, m *redis.Message)
	// Subscribed is told of each confirmation of a channel's
	// subscription: the first, and every one after the connection was
	// lost and restored or replaced. The messages published while it was
	// not in place are gone, so whoever follows the channel reads what it
	// may have missed.
	Subscribed func(ctx context.Context, channel string)
	// Probe is how long the subscription may be quiet before it is
	// pinged; quiet for two more, it is taken for lost and replaced. 0:
	// DefaultProbe.
	Probe time.Duration
}

// Subscription is one Redis subscription, to the channels a process wants
// at the moment, that stays alive. go-redis restores a connection that
// fails, but not one that goes silent without failing (a partition, a
// master replaced behind its address: the kernel keeps such a connection
// for many minutes, and the pings of go-redis' own health check, never
// answered, keep TCP keep-alive from probing it). So a quiet subscription
// is pinged, and one whose pings go unanswered is replaced by a new
// connection.
//
// Want and Unwant only record what is wanted: one goroutine brings the
// subscription to it, so that no caller waits on Redis.
type Subscription struct {
	log *slog.Logger
	rdb redis.UniversalClient
	cfg SubscriptionConfig

	mu     sync.Mutex
	want   map[string]bool
	closed bool

	// ps is replaced when it goes silent; heard is when the current one
	// last said anything (UnixNano).
	psMu  sync.Mutex
	ps    *redis.PubSub
	heard atomic.Int64

	changed chan struct{}
	stop    chan struct{}
	// kept and received close as keep and receive end.
	kept, received chan struct{}
	// replacedAt is heard as the last replacement set it (keep's own).
	replacedAt int64
}

// Subscribe starts a subscription to no channel on rdb. It logs what it
// does on its own with ctx, so ctx should outlive it.
func Subscribe(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger, cfg SubscriptionConfig) *Subscription {
	if cfg.Probe <= 0 {
		cfg.Probe = DefaultProbe
	}
	s := &Subscription{
		log: log, rdb: rdb, cfg: cfg,
		want:     map[string]bool{},
		ps:       rdb.Subscribe(ctx),
		changed:  make(chan struct{}, 1),
		stop:     make(chan struct{}),
		kept:     make(chan struct{}),
		received: make(chan struct{}),
	}
	s.heard.Store(time.Now().UnixNano())
	go s.receive(ctx)
	go s.keep(ctx)
	return s
}

// Want adds channel to those subscribed.
func (s *Subscription) Want(channel string) { s.set(channel, true) }

// Unwant removes channel from those subscribed.
func (s *Subscription) Unwant(channel string) { s.set(channel, false) }

func (s *Subscription) set(channel string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.want[channel] == on {
		return
	}
	if on {
		s.want[channel] = true
	} else {
		delete(s.want, channel)
	}
	select {
	case s.changed <- struct{}{}:
	default: // keep will read the latest set anyway
	}
}

// Close ends the subscription.
func (s *Subscription) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.kept // keep replaces the connection: not any more
	err := s.current().Close()
	<-s.received
	return err
}

func (s *Subscription) current() *redis.PubSub {
	s.psMu.Lock()
	defer s.psMu.Unlock()
	return s.ps
}

func (s *Subscription) stopped() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// receive reads the subscription, the current one after a replacement.
func (s *Subscription) receive(ctx context.Context) {
	defer close(s.received)
	backoff := time.Duration(0)
	for {
		ps := s.current()
		m, err := ps.ReceiveTimeout(ctx, s.cfg.Probe)
		if s.stopped() {
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
			case <-s.stop:
				return
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		if ps == s.current() {
			s.heard.Store(time.Now().UnixNano())
		}
		switch m := m.(type) {
		case *redis.Message:
			s.cfg.Message(ctx, m)
		case *redis.Subscription:
			if m.Kind == "subscribe" && s.cfg.Subscribed != nil {
				s.cfg.Subscribed(ctx, m.Channel)
			}
		}
	}
}

// keep brings the subscription to the channels wanted, and replaces it
// when it goes silent.
func (s *Subscription) keep(ctx context.Context) {
	defer close(s.kept)
	tick := time.NewTicker(s.cfg.Probe)
	defer tick.Stop()
	// held holds the channels handed to the current subscription, true
	// once it took their SUBSCRIBE. One that failed is sent again at the
	// next tick: go-redis may already have dialled a new connection in the
	// failed call, subscribed to the channels it held before this one.
	// go-redis keeps a channel whose SUBSCRIBE failed, and subscribes it on
	// the connection it dials next: one no longer wanted is unsubscribed
	// all the same, or the process would hear its shard for nothing.
	held := map[string]bool{}
	for {
		select {
		case <-s.stop:
			return
		case <-s.changed:
		case <-tick.C:
			if s.probeQuiet(ctx) {
				clear(held)
			}
		}
		var add, drop []string
		s.mu.Lock()
		for c := range s.want {
			if !held[c] {
				add = append(add, c)
			}
		}
		for c := range held {
			if !s.want[c] {
				drop = append(drop, c)
			}
		}
		s.mu.Unlock()
		ps := s.current()
		if len(add) > 0 {
			err := ps.Subscribe(ctx, add...)
			if err != nil {
				s.log.DebugContext(ctx, "subscribe", "channels", len(add), "err", err)
			}
			for _, c := range add {
				held[c] = err == nil
			}
		}
		if len(drop) > 0 {
			// A failed UNSUBSCRIBE does no harm: go-redis forgets the
			// channels before it sends it, and a connection it dials
			// again subscribes only those it still holds. After a Redis
			// restart every channel dropped would warn here.
			if err := ps.Unsubscribe(ctx, drop...); err != nil {
				s.log.DebugContext(ctx, "unsubscribe", "channels", len(drop), "err", err)
			}
			for _, c := range drop {
				delete(held, c)
			}
		}
	}
}

// probeQuiet pings a subscription quiet for a probe, and replaces one
// quiet for three (its pings unanswered); it reports a replacement, whose
// channels are to be subscribed again.
func (s *Subscription) probeQuiet(ctx context.Context) bool {
	quiet := time.Since(time.Unix(0, s.heard.Load()))
	if quiet < s.cfg.Probe {
		return false
	}
	if quiet < 3*s.cfg.Probe {
		if err := s.current().Ping(ctx); err != nil {
			s.log.DebugContext(ctx, "subscription ping", "err", err)
		}
		return false
	}
	// Warned once an outage: a Redis out of reach has every new
	// connection replaced in turn, silent as the first.
	level := slog.LevelWarn
	if s.heard.Load() == s.replacedAt {
		level = slog.LevelDebug
	}
	s.log.Log(ctx, level, "subscription silent: replaced by a new connection", "quiet", quiet.Round(time.Millisecond))
	fresh := s.rdb.Subscribe(ctx)
	s.psMu.Lock()
	old := s.ps
	s.ps = fresh
	s.psMu.Unlock()
	s.replacedAt = time.Now().UnixNano()
	s.heard.Store(s.replacedAt)
	_ = old.Close()
	return true
}
