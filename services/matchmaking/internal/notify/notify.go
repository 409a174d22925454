// Package notify fans "look again" signals out to the watch streams of one
// process. A process holds one Redis subscription however many tickets,
// invites and rematches it watches; a signal carries ids only, and every
// watcher re-reads the state itself, so a lost or coalesced signal can
// delay an update but never corrupt one (watchers also re-read on a timer).
package notify

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redisx"
)

// Hub routes signals by id to local subscribers.
type Hub struct {
	sub  *redisx.Subscription
	mu   sync.Mutex
	subs map[string]map[*Sub]struct{}
}

// Sub fires (coalescing) when its id may have changed.
type Sub struct {
	id string
	C  chan struct{}
}

// confirmWithin bounds New's wait for Redis to confirm the subscription.
const confirmWithin = 10 * time.Second

// New subscribes to channel and returns once Redis confirmed the
// subscription, so no signal published after New returns is missed.
// Every later confirmation (the connection restored, or replaced when it
// went silent) fires every Sub, since signals published meanwhile are
// lost.
func New(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger, channel string) (*Hub, error) {
	h := &Hub{subs: map[string]map[*Sub]struct{}{}}
	confirmed := make(chan struct{})
	var once sync.Once
	h.sub = redisx.Subscribe(ctx, rdb, log, redisx.SubscriptionConfig{
		Message: func(_ context.Context, m *redis.Message) { h.fire(strings.Split(m.Payload, ",")) },
		Subscribed: func(context.Context, string) {
			h.fire(nil)
			once.Do(func() { close(confirmed) })
		},
	})
	h.sub.Want(channel)
	t := time.NewTimer(confirmWithin)
	defer t.Stop()
	select {
	case <-confirmed:
		return h, nil
	case <-ctx.Done():
		_ = h.sub.Close()
		return nil, fmt.Errorf("subscribe %s: %w", channel, ctx.Err())
	case <-t.C:
		_ = h.sub.Close()
		return nil, fmt.Errorf("subscribe %s: not confirmed within %v", channel, confirmWithin)
	}
}

// fire signals the subscribers of ids, or every subscriber when ids is
// nil.
func (h *Hub) fire(ids []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ids == nil {
		for _, subs := range h.subs {
			for s := range subs {
				signal(s)
			}
		}
		return
	}
	for _, id := range ids {
		for s := range h.subs[id] {
			signal(s)
		}
	}
}

func signal(s *Sub) {
	select {
	case s.C <- struct{}{}:
	default: // already signalled
	}
}

// Subscribe returns a Sub for id; call Unsubscribe when done.
func (h *Hub) Subscribe(id string) *Sub {
	s := &Sub{id: id, C: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[id] == nil {
		h.subs[id] = map[*Sub]struct{}{}
	}
	h.subs[id][s] = struct{}{}
	return s
}

// Unsubscribe stops signalling s.
func (h *Hub) Unsubscribe(s *Sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[s.id], s)
	if len(h.subs[s.id]) == 0 {
		delete(h.subs, s.id)
	}
}

// Watchers counts the subscribers, for metrics.
func (h *Hub) Watchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, s := range h.subs {
		n += len(s)
	}
	return n
}

// Close ends the subscription.
func (h *Hub) Close() error {
	return h.sub.Close()
}
