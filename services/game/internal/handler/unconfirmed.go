package handler

import (
	"context"
	"sync"
	"time"

	"github.com/palacehq/palace/services/game/internal/model"
)

// confirmEvery is how often a process confirms the games whose last
// commit's wait for replicas failed.
const confirmEvery = 500 * time.Millisecond

// unconfirmed holds the games whose last commit failed its wait for
// replicas (or failed in a way that leaves it unknown whether it was
// stored): perhaps stored on the master, but neither acknowledged nor
// published. Its client should retry, which confirms it; one that never
// does must not leave the game's streams, and the opponent's clock,
// waiting on a move they cannot see, so the process confirms such games
// itself until a confirmation succeeds.
type unconfirmed struct {
	mu    sync.Mutex
	games map[string]struct{}
}

func (u *unconfirmed) add(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.games[id] = struct{}{}
}

// take empties the set, in random order.
func (u *unconfirmed) take() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	ids := make([]string, 0, len(u.games))
	for id := range u.games {
		ids = append(ids, id)
	}
	clear(u.games)
	return ids
}

// confirmLater remembers a game whose commit may be stored unconfirmed.
func (h *Handler) confirmLater(id string) {
	if h.store.Waits() {
		h.unconfirmed.add(id)
	}
}

// confirm confirms game id now (store.Confirm, whose hold it returns)
// and, should that fail, later without the caller.
func (h *Handler) confirm(ctx context.Context, id string) (model.TurnHold, error) {
	held, err := h.store.Confirm(ctx, id)
	if err != nil {
		h.confirmLater(id)
	}
	return held, err
}

// keepConfirming confirms the games of confirmLater, until ctx ends.
// Confirming a game that is fine costs a wait and has its streams read
// the log once; one that fails is tried again.
func (h *Handler) keepConfirming(ctx context.Context) {
	t := time.NewTicker(confirmEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids := h.unconfirmed.take()
		for i, id := range ids {
			_, err := h.store.Confirm(ctx, id)
			if err == nil {
				continue
			}
			h.log.DebugContext(ctx, "confirm", "game", id, "err", err)
			// The replicas are behind or Redis is out of reach: the others
			// would each wait as long, so they wait for the next round
			// (taken in random order, so no game is always last).
			for _, id := range ids[i:] {
				h.unconfirmed.add(id)
			}
			break
		}
	}
}
