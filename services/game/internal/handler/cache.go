package handler

import (
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/services/game/internal/model"
)

// stateCache keeps the last state this process committed for recently
// changed games (with its replayed moves), and the answer that commit
// gave. The next command on the same game runs on it without reading
// Redis: its commit still compares the version, so a stale entry only
// costs a conflict and a reload. Stored state stays the only truth.
//
// An entry not committed for idle is dropped: games abandoned, expired
// from Redis or finished by another process are never committed here
// again, and a long game's entry holds all its moves. Reads do not keep an
// entry: watchers of a game another process plays would keep it for ever.
type stateCache struct {
	mu    sync.Mutex
	limit int
	idle  time.Duration
	now   func() time.Time
	m     map[string]cacheEntry
	// swept is when sweep last looked at every entry.
	swept time.Time
	seed  maphash.Seed
}

type cacheEntry struct {
	st *model.State
	// requestID and answer are the last commit's, as stored in Redis.
	requestID string
	answer    []byte
	// ids holds every request field the game remembers an answer under,
	// as of st; nil when not known.
	ids  *requestIDs
	used time.Time
}

// requestIDs is a set of a game's request fields, as hashes: a field
// that is not in it was never used in the game, and one that is may have
// been (hashes of two fields may be equal).
type requestIDs struct{ sorted []uint64 }

func newStateCache(limit int, idle time.Duration, now func() time.Time) *stateCache {
	return &stateCache{limit: limit, idle: idle, now: now, m: make(map[string]cacheEntry), swept: now(), seed: maphash.MakeSeed()}
}

// unused reports whether the game is cached and its request field is
// known never to have been used in it: only then may a command run on the
// cached state write anything before its commit, which is where Redis
// finds a request id used again.
func (c *stateCache) unused(id, field string) bool {
	if field == "" {
		return true // nothing to find used
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok || e.ids == nil {
		return false
	}
	_, found := slices.BinarySearch(e.ids.sorted, maphash.String(c.seed, field))
	return !found
}

// knowsIDs reports whether the game is cached with its request fields.
func (c *stateCache) knowsIDs(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[id].ids != nil
}

// unsure records that a commit of the game may have been made, its answer
// lost: the cached state may be behind the stored one, and the game may
// have used any request field. Its fields are no longer known, so no
// command run on the cached state writes ahead of its commit (an AI job, a
// deadline for a state that would never be stored) until a read from
// Redis knows them again; one that writes nothing ahead may still run on
// it, its commit's compare-and-set deciding.
func (c *stateCache) unsure(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[id]; ok {
		e.ids = nil
		c.m[id] = e
	}
}

// add puts field in the set; c.mu is held.
func (c *stateCache) add(ids *requestIDs, field string) {
	h := maphash.String(c.seed, field)
	if i, found := slices.BinarySearch(ids.sorted, h); !found {
		ids.sorted = slices.Insert(ids.sorted, i, h)
	}
}

// get returns the cached state; callers must not change it.
func (c *stateCache) get(id string) *model.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[id].st
}

// answer returns the stored answer to requestID when it was the last
// command this process committed on the game, with the stamp of that
// commit: a client that lost that answer and retries at once gets it
// after one small read that finds the commit still stored.
func (c *stateCache) answer(id, requestID string) (answer []byte, stamp string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[id]; requestID != "" && e.requestID == requestID {
		return e.answer, e.st.Stamp
	}
	return nil, ""
}

// replayed returns the cached replay of exactly the state that the commit
// stamped stamp stored at version, or nil.
func (c *stateCache) replayed(id string, version uint64, stamp string) *rules.Game {
	if st := c.get(id); st != nil && st.Version == version && st.Stamp == stamp {
		return st.Replayed()
	}
	return nil
}

// put caches st, just committed over prev (nil for a new game), with the
// answer stored under the request field requestID ("" for none). The
// game's request fields are known when fields lists them as of prev, or
// when the cached entry is prev's and knows them; otherwise not.
func (c *stateCache) put(st, prev *model.State, requestID string, answer []byte, fields []string) {
	id := st.ID
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.m[id]
	if !had && len(c.m) >= c.limit {
		// Evict an arbitrary entry: map order is random enough to spread
		// evictions, and a miss only costs a replay.
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	var ids *requestIDs
	switch {
	case prev == nil:
		ids = &requestIDs{}
	case fields != nil:
		ids = &requestIDs{sorted: make([]uint64, 0, len(fields)+1)}
		for _, f := range fields {
			ids.sorted = append(ids.sorted, maphash.String(c.seed, f))
		}
		slices.Sort(ids.sorted)
	case had && old.ids != nil && old.st.Version == prev.Version && old.st.Stamp == prev.Stamp:
		ids = old.ids
	}
	if ids != nil && requestID != "" {
		c.add(ids, requestID)
	}
	if answer == nil {
		requestID = ""
	}
	c.m[id] = cacheEntry{st: st, requestID: requestID, answer: answer, ids: ids, used: c.now()}
}

// sweep drops the entries not committed for idle. It looks at every entry at
// most four times per idle period, however often it is called.
func (c *stateCache) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if now.Sub(c.swept) < c.idle/4 {
		return
	}
	c.swept = now
	for id, e := range c.m {
		if now.Sub(e.used) >= c.idle {
			delete(c.m, id)
		}
	}
}

// clear drops every entry.
func (c *stateCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
}

func (c *stateCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

// running lists the cached games in which something runs against the side
// to move (model.Waiting: a clock's turn, a formation's choice, the wait
// for a first move); callers must not change them.
func (c *stateCache) running() []*model.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*model.State
	for _, e := range c.m {
		if _, _, ok := model.Waiting(e.st); ok {
			out = append(out, e.st)
		}
	}
	return out
}
