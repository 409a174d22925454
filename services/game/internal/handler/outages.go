package handler

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// While Redis is out of reach no command commits, moves included, yet
// the clocks run on: a player to move through an outage longer than their
// time left would lose on time without having been able to move. So the
// process watches Redis and remembers when it could not reach it, and a
// command excuses the running turn the part of it that lies in those
// spans (model.Excuse), in the same commit, before it is judged.

const (
	// reachEvery spaces the pings: an outage is excused from at most this
	// long after it began (the lag grace covers that much).
	reachEvery = 250 * time.Millisecond
	// reachTimeout is how long a ping may take before Redis counts as out
	// of reach: longer than any answer of a Redis that serves commands.
	reachTimeout = time.Second
	// maxOutages bounds the spans remembered, oldest dropped first; a turn
	// spanning more outages than this is excused only the newest.
	maxOutages = 64
)

// span is an outage in Unix milliseconds, on the time base of now().
type span struct{ from, to int64 }

// outages are the spans in which this process could not reach Redis.
type outages struct {
	mu    sync.Mutex
	spans []span // ended, oldest first
	// since is when the current outage began; 0 while Redis answers.
	since int64
	// answered is the last instant Redis was known to answer: a ping sent
	// before it that failed later begins no outage.
	answered int64
	// ended is set when an outage ends, until the watcher takes it.
	ended bool
}

// down records that Redis did not answer a ping sent at atMs.
func (o *outages) down(atMs int64) (began bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since != 0 || atMs <= o.answered {
		return false
	}
	o.since = atMs
	return true
}

// up records that Redis answered at atMs (a ping, a read, a commit), and
// returns the outage this ends (zero when none was under way).
func (o *outages) up(atMs int64) span {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.answered = max(o.answered, atMs)
	if o.since == 0 {
		return span{}
	}
	s := span{from: o.since, to: max(atMs, o.since)}
	o.since = 0
	if len(o.spans) == maxOutages {
		o.spans = append(o.spans[:0], o.spans[1:]...)
	}
	o.spans = append(o.spans, s)
	o.ended = true
	return s
}

// takeEnded reports whether an outage ended since it was last asked.
func (o *outages) takeEnded() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	was := o.ended
	o.ended = false
	return was
}

// within is how much of [fromMs, toMs] lies in outages, the one under way
// counted up to toMs (a command committing now found Redis again before
// the next ping did).
func (o *outages) within(fromMs, toMs int64) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	var total int64
	add := func(s span) {
		if lo, hi := max(s.from, fromMs), min(s.to, toMs); hi > lo {
			total += hi - lo
		}
	}
	for _, s := range o.spans {
		add(s)
	}
	if o.since != 0 {
		add(span{from: o.since, to: toMs})
	}
	return time.Duration(total) * time.Millisecond
}

// reached records that Redis answered at t.
func (h *Handler) reached(t time.Time) {
	if s := h.outages.up(t.UnixMilli()); s.to != 0 {
		h.log.Info("redis answers again; the turns under way are excused the outage", "outage", time.Duration(s.to-s.from)*time.Millisecond)
	}
}

// watchRedis pings Redis every reachEvery until ctx ends, recording the
// outages. Once one ends, the games this process has cached whose clocks
// run are excused it at once, so that their players' apps show the time
// given back before anyone moves.
func (h *Handler) watchRedis(ctx context.Context) {
	t := time.NewTicker(reachEvery)
	defer t.Stop()
	var excusing sync.WaitGroup
	defer excusing.Wait()
	var busy atomic.Bool
	for {
		// One pass at a time: an outage that ends during one is left for
		// the next, which excuses the games it missed.
		if !busy.Load() && h.outages.takeEnded() {
			busy.Store(true)
			excusing.Go(func() {
				defer busy.Store(false)
				h.excuseCached(ctx)
			})
		}
		sent := h.now()
		pctx, cancel := context.WithTimeout(ctx, reachTimeout)
		err := h.store.Reach(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if h.outages.down(sent.UnixMilli()) {
				h.log.WarnContext(ctx, "redis out of reach: the turns under way are not charged the time until it answers", "err", err)
			}
		default:
			h.reached(h.now())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// excuseCached commits the excuse of each cached game whose clock runs.
func (h *Handler) excuseCached(ctx context.Context) {
	n := 0
	for _, id := range h.cache.running() {
		if ctx.Err() != nil {
			return
		}
		ok, err := h.excuseGame(ctx, id)
		if err != nil {
			h.log.DebugContext(ctx, "excuse the outage", "game", id, "err", err)
		}
		if ok {
			n++
		}
	}
	if n > 0 {
		h.log.InfoContext(ctx, "turns excused the outage", "games", n)
	}
}

// excuseGame commits the excuse of one game's running turn, if it has one
// due. A command committed meanwhile made its own.
func (h *Handler) excuseGame(ctx context.Context, id string) (bool, error) {
	unlock, err := h.locks.lock(ctx, id)
	if err != nil {
		return false, err
	}
	defer unlock()
	l, err := h.load(ctx, id, "")
	if err != nil {
		return false, err
	}
	ch, ok := h.excuse(l.State, l.Now)
	if !ok {
		return false, nil
	}
	if _, err := h.commit(ctx, l.State, ch, command{id: id}, l.Now); err != nil {
		return false, err
	}
	return true, nil
}
