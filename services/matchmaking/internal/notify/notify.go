// Package notify fans "look again" signals out to the watch streams of one
// process. A process holds one Redis subscription however many tickets,
// invites and rematches it watches; a signal carries ids only, and every
// watcher re-reads the state itself, so a lost or coalesced signal can
// delay an update but never corrupt one (watchers also re-read on a timer).
package notify

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Hub routes signals by id to local subscribers.
type Hub struct {
	ps   *redis.PubSub
	mu   sync.Mutex
	subs map[string]map[*Sub]struct{}
	done chan struct{}
}

// Sub fires (coalescing) when its id may have changed.
type Sub struct {
	id string
	C  chan struct{}
}

// New subscribes to channel and starts routing once Redis confirmed the
// subscription, so no signal published after New returns is missed.
func New(ctx context.Context, rdb redis.UniversalClient, channel string) (*Hub, error) {
	ps := rdb.Subscribe(ctx, channel)
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return nil, fmt.Errorf("subscribe %s: %w", channel, err)
	}
	h := &Hub{ps: ps, subs: map[string]map[*Sub]struct{}{}, done: make(chan struct{})}
	go h.run()
	return h, nil
}

func (h *Hub) run() {
	defer close(h.done)
	for msg := range h.ps.Channel(redis.WithChannelSize(4096)) {
		h.mu.Lock()
		for id := range strings.SplitSeq(msg.Payload, ",") {
			for s := range h.subs[id] {
				select {
				case s.C <- struct{}{}:
				default: // already signalled
				}
			}
		}
		h.mu.Unlock()
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
	err := h.ps.Close()
	<-h.done
	return err
}
