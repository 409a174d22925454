package handler

import (
	"sync"

	"github.com/palacehq/palace/pkg/rules"
)

// replayCache keeps the replayed game of recently changed games, keyed by
// id and valid for one version only: the next command on the same game in
// this process skips the replay. Stored state stays the only truth; a miss
// just replays.
type replayCache struct {
	mu    sync.Mutex
	limit int
	m     map[string]replayEntry
}

type replayEntry struct {
	version uint64
	game    *rules.Game
}

func newReplayCache(limit int) *replayCache {
	return &replayCache{limit: limit, m: make(map[string]replayEntry, limit)}
}

func (c *replayCache) get(id string, version uint64) *rules.Game {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok || e.version != version {
		return nil
	}
	return e.game
}

func (c *replayCache) put(id string, version uint64, g *rules.Game) {
	if g == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[id]; !ok && len(c.m) >= c.limit {
		// Evict an arbitrary entry: map order is random enough to spread
		// evictions, and a miss only costs a replay.
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[id] = replayEntry{version: version, game: g}
}

func (c *replayCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}
