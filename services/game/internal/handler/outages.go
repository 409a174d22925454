package handler

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/redisx"
	"github.com/palacehq/palace/services/game/internal/store"
)

// While Redis is out of reach no command commits, moves included, yet
// the clocks run on: a player to move through an outage longer than their
// time left would lose on time without having been able to move (or get
// the default formation, or see the game aborted for want of a first
// move). So the process watches Redis and remembers when it could not
// reach it, and a command excuses what runs against the side to move the
// part of it that lies in those spans (model.Excuse), in the same commit,
// before it is judged. A Redis that answers but refuses writes (full, or
// a replica after a failover) commits nothing either: to the clocks that
// is an outage too, which only a write taken ends.

const (
	// reachEvery spaces the pings (each asks whether Redis takes writes,
	// redisx.Writable): an outage is excused from at most this
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
	spans []span // ended, oldest first, none overlapping another
	// since is when the current outage began; 0 while Redis answers.
	since int64
	// refused: Redis refused a write in the outage under way, or held one
	// past reachTimeout, so only a write taken ends it, not an answer to a
	// read.
	refused bool
	// answered is the last instant Redis was known to answer, wrote the
	// last it was known to take a write: a ping sent before the first that
	// failed later begins no outage, nor one sent before the second whose
	// write was refused or held.
	answered, wrote int64
	// ended is set when an outage ends, until the watcher takes it.
	ended bool
}

// down records that Redis did not answer a ping sent at atMs (refused:
// it refused the write the ping asked about, or held it past
// reachTimeout). A refusal stands against reads answered since, which a
// Redis refusing or holding writes answers all along.
func (o *outages) down(atMs int64, refused bool) (began bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if atMs <= o.wrote || (!refused && atMs <= o.answered) {
		return false
	}
	o.refused = o.refused || refused
	if o.since != 0 {
		return false
	}
	o.since = atMs
	return true
}

// failed records that a command begun at atMs failed for want of Redis
// (refused: Redis answered, refusing its write): nothing could commit from
// then on. Unlike a ping's, its evidence stands against answers since (on
// a cluster, pings of every master may succeed while the game's own master
// still refuses).
func (o *outages) failed(atMs int64, refused bool) (began bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refused = o.refused || refused
	if o.since != 0 {
		o.since = min(o.since, atMs)
		return false
	}
	o.since = atMs
	return true
}

// up records that Redis answered (wrote: took a write): an outage under
// way ends at endMs (unless it began after endMs, or Redis refused writes
// in it and this took none), and a ping sent before answeredMs that fails
// later begins none. It returns the outage this ends (zero when none was
// under way).
func (o *outages) up(endMs, answeredMs int64, wrote bool) span {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.answered = max(o.answered, answeredMs)
	if wrote {
		o.wrote = max(o.wrote, answeredMs)
	}
	if o.since == 0 || endMs < o.since || (o.refused && !wrote) {
		// Nothing under way, or an answer known only from before the
		// outage began, or a read's answer while writes are refused: it
		// says nothing of the outage.
		return span{}
	}
	s := span{from: o.since, to: max(endMs, o.since)}
	o.since, o.refused = 0, false
	if s.to == s.from {
		return span{}
	}
	o.insert(s)
	o.ended = true
	return s
}

// answeredSince reports whether Redis answered at atMs or later.
func (o *outages) answeredSince(atMs int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.answered >= atMs
}

// silent records s, a span in which no process of the service held a
// lease, and reports whether it was news.
func (o *outages) silent(s span) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.spans {
		if e.from <= s.from && s.to <= e.to {
			return false
		}
	}
	o.insert(s)
	o.ended = true
	return true
}

// insert adds s to the spans, merged with those it meets; o.mu is held.
func (o *outages) insert(s span) {
	// A failed command may date an outage back into one already ended.
	merged := s
	kept := o.spans[:0]
	for _, e := range o.spans {
		if e.to < merged.from || e.from > merged.to {
			kept = append(kept, e)
			continue
		}
		merged = span{from: min(e.from, merged.from), to: max(e.to, merged.to)}
	}
	i, _ := slices.BinarySearchFunc(kept, merged, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	o.spans = slices.Insert(kept, i, merged)
	if len(o.spans) > maxOutages {
		o.spans = slices.Delete(o.spans, 0, len(o.spans)-maxOutages)
	}
}

// contact is this process's unbroken contact with Redis, as its pings
// see it: no silence of the service (see renew) reaches into it, since
// the process could serve then, however late its lease's renewal.
type contact struct {
	mu sync.Mutex
	// since is when the contact began (0: none now), last when Redis last
	// answered, in Unix milliseconds.
	since, last int64
	// breaks are the broken contacts not yet told to a renewal, oldest
	// first: a link that flaps may break twice between two renewals, and
	// the process served between the breaks.
	breaks []contactBreak
}

// contactBreak is a broken contact: the latest the process could serve
// before it (a contactGap after its last answer), and when the next
// contact began (0: none yet), in Unix milliseconds.
type contactBreak struct{ served, resumed int64 }

// maxBreaks bounds the breaks kept for a renewal; beyond, the oldest are
// forgotten, and charged as before there were any (renewals come at
// least every few seconds, and at once after a break).
const maxBreaks = 32

// contactGap is the longest time between two answers of an unbroken
// contact: the pings come every reachEvery and may take reachTimeout.
const contactGap = reachEvery + reachTimeout + 750*time.Millisecond

// answered records that Redis answered a ping sent at sentMs by atMs, and
// reports whether that began a contact after a break long enough to be a
// silence, which a renewal should be told of at once. A contact begins
// with the answer, not the asking: a ping sent in an outage may be
// answered only when it ends, and one that took longer than reachTimeout
// broke the contact it was part of.
func (c *contact) answered(sentMs, atMs int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	resumed := false
	if c.since == 0 || sentMs-c.last > contactGap.Milliseconds() || atMs-sentMs > reachTimeout.Milliseconds() {
		if n := len(c.breaks); n > 0 && c.breaks[n-1].resumed == 0 {
			c.breaks[n-1].resumed = atMs
		} else if c.last != 0 {
			c.broke(contactBreak{served: c.lastServed(), resumed: atMs})
		}
		if n := len(c.breaks); n > 0 && c.breaks[n-1].resumed == atMs {
			// One no longer than the gap between two answers is no
			// silence: the process could have served throughout.
			if resumed = atMs > c.breaks[n-1].served; !resumed {
				c.breaks = c.breaks[:n-1]
			}
		}
		c.since = atMs
	}
	c.last = max(c.last, atMs)
	return resumed
}

// broke keeps b among the breaks to tell.
func (c *contact) broke(b contactBreak) {
	c.breaks = append(c.breaks, b)
	if len(c.breaks) > maxBreaks {
		c.breaks = slices.Delete(c.breaks, 0, len(c.breaks)-maxBreaks)
	}
}

// lost records that Redis did not answer: the contact under way, if any,
// ended with its last answer.
func (c *contact) lost() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.since != 0 && c.last != 0 {
		c.broke(contactBreak{served: c.lastServed()})
	}
	c.since = 0
}

// began is when the contact under way began, or now if none is: if Redis
// has not answered a ping for longer than contactGap, the process was
// paused or cut off, and its pings have yet to say so.
func (c *contact) began(now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.since == 0 || now.UnixMilli()-c.last > contactGap.Milliseconds() {
		return now
	}
	return time.UnixMilli(min(c.since, now.UnixMilli()))
}

// untold is the breaks a renewal has not been told of, as the renewal
// takes them.
func (c *contact) untold() []store.Break {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.untoldLocked()
}

func (c *contact) untoldLocked() []store.Break {
	out := make([]store.Break, 0, len(c.breaks)+1)
	for _, b := range c.breaks {
		sb := store.Break{Served: time.UnixMilli(b.served)}
		if b.resumed != 0 {
			sb.Resumed = time.UnixMilli(b.resumed)
		}
		out = append(out, sb)
	}
	return out
}

// untoldAt is untold at now, with the break under way if Redis has not
// answered a ping for longer than contactGap (the process was paused, and
// its pings have yet to say so), as began counts it: a beat then must not
// vouch for the pause.
func (c *contact) untoldAt(now time.Time) []store.Break {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.untoldLocked()
	underWay := len(c.breaks) > 0 && c.breaks[len(c.breaks)-1].resumed == 0
	if !underWay && c.since != 0 && now.UnixMilli()-c.last > contactGap.Milliseconds() {
		out = append(out, store.Break{Served: time.UnixMilli(c.lastServed())})
	}
	return out
}

// lastServed is the latest the process could serve in the contact that
// answered last: a contactGap after that answer.
func (c *contact) lastServed() int64 { return c.last + contactGap.Milliseconds() }

// told forgets the breaks a renewal that counted the contact under way
// from contactMs took into account: told again, it would record their
// silences again. One told while under way was recorded up to contactMs
// only: its rest, to when the contact came back (now, or later), is told
// next. Breaks that came meanwhile stay.
func (c *contact) told(passed []store.Break, contactMs int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for n < len(passed) && n < len(c.breaks) && c.breaks[n].served == passed[n].Served.UnixMilli() {
		n++
	}
	if n > 0 && passed[n-1].Resumed.IsZero() {
		n--
		c.breaks[n].served = max(c.breaks[n].served, contactMs)
		if r := c.breaks[n].resumed; r != 0 && r <= c.breaks[n].served {
			n++ // nothing left of it
		}
	}
	c.breaks = slices.Delete(c.breaks, 0, n)
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
	return o.before(fromMs, toMs, math.MaxInt64)
}

// before is how much of [fromMs, toMs] lies in outages before a wait of
// budgetMs, counted outside them, runs out: the time of an outage that
// began once it had run out is not counted.
func (o *outages) before(fromMs, toMs, budgetMs int64) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	spans := o.spans
	if o.since != 0 {
		// The outage under way may reach back into an ended one.
		spans = append(slices.Clone(o.spans), span{from: o.since, to: toMs})
		slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	}
	cursor, left, total := fromMs, budgetMs, int64(0)
	for _, s := range spans {
		from, to := max(s.from, cursor), min(s.to, toMs)
		if to <= from {
			continue
		}
		if from-cursor > left {
			break
		}
		left -= from - cursor
		total += to - from
		cursor = to
	}
	return time.Duration(total) * time.Millisecond
}

// reached records that Redis answered a command by end (wrote: took its
// write): an outage under way ends there. Not on a cluster, where the
// answer of one master says nothing of the others: there only a ping of
// every master ends an outage.
func (h *Handler) reached(end time.Time, wrote bool) {
	if h.store.Clustered() {
		return
	}
	h.pinged(end, wrote)
}

// pinged records that Redis answered by end (wrote: it takes writes).
func (h *Handler) pinged(end time.Time, wrote bool) {
	if s := h.outages.up(end.UnixMilli(), max(end.UnixMilli(), h.now().UnixMilli()), wrote); s.to != 0 {
		h.metrics.outages.Add(context.Background(), 1)
		h.log.Info("redis serves again: the turns under way are excused the outage", "outage", time.Duration(s.to-s.from)*time.Millisecond)
	}
}

// watchRedis pings Redis every reachEvery until ctx ends, recording the
// outages. Once one ends, the games this process has cached whose clocks
// run are excused it at once, so that their players' apps show the time
// given back before anyone moves.
func (h *Handler) watchRedis(ctx context.Context) {
	t := time.NewTicker(reachEvery)
	defer t.Stop()
	var excusing, pinging sync.WaitGroup
	defer excusing.Wait()
	defer pinging.Wait()
	var busy atomic.Bool
	var inFlight atomic.Int32
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
		// The Redis client bounds a read by its own timeout, not by the
		// context's deadline: the ping is timed here. One at a time (but
		// for one left behind, below), so a Redis that hangs gathers no
		// pile of them.
		res := make(chan error, 1)
		inFlight.Add(1)
		pinging.Go(func() {
			defer inFlight.Add(-1)
			pctx, cancel := context.WithTimeout(ctx, reachTimeout)
			defer cancel()
			res <- h.store.Writable(pctx)
		})
		var err error
		began := false
		select {
		case err = <-res:
		case <-time.After(reachTimeout):
			// Out of reach from the ping on, or holding writes (paused
			// for a failover) while it answers reads: only a write taken
			// ends this. Told once the ping says why (the client may go on
			// dialling long after).
			if inFlight.Load() == 1 && h.outages.answeredSince(sent.UnixMilli()) {
				// Redis answered after the ping was sent: the ping met
				// Redis only later (the Redis client retries a refused
				// write after a pause) or is lost on a connection of its
				// own, and says nothing of when Redis stopped serving, if
				// it did. It is left behind, and a new one asks at once.
				continue
			}
			began = h.outages.down(sent.UnixMilli(), true)
			select {
			case err = <-res:
			case <-ctx.Done():
				return
			}
		case <-ctx.Done():
			return
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			h.contact.lost()
			refused := redisx.WritesRefused(err)
			if h.outages.down(sent.UnixMilli(), refused) || began {
				h.log.WarnContext(ctx, outageMessage(refused), "err", err)
			}
		default:
			if began {
				h.contact.lost()
				h.log.WarnContext(ctx, "redis left a ping unanswered for over "+reachTimeout.String()+" (stalled, or holding writes): the turns (and waits) under way are not charged that time")
			}
			now := h.now()
			if h.contact.answered(sent.UnixMilli(), now.UnixMilli()) {
				select {
				case h.renewSoon <- struct{}{}:
				default:
				}
			}
			h.pinged(now, true)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Every process beats about once a second (store.Beat), so that one that
// beat before and finds another epoch in Redis knows that Redis lost its
// data, and says it lives (store.Alive), so that the silence after its
// death is dated from then, not from the end of its lease.
const (
	beatEvery = store.BeatEvery
	beatKeep  = 24 * time.Hour
)

// keepBeating beats every beatEvery until ctx ends, on its own: a beat
// that hangs with Redis must not hold up the pings that time outages.
func (h *Handler) keepBeating(ctx context.Context) {
	t := time.NewTicker(beatEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.beat(ctx)
	}
}

// beat records that this process lives. A process that finds another
// epoch in Redis than at its last beat drops the games it caches: Redis
// lost them, and a stream or a command must not be served from this
// process's copies. The epoch, not the beat's absence, tells it: with
// several processes only the first to beat after the loss finds none.
func (h *Handler) beat(ctx context.Context) {
	if err := h.store.Alive(ctx, h.proc, time.UnixMilli(h.started), h.contact.untoldAt(h.now())); err != nil {
		h.log.DebugContext(ctx, "beat", "err", err)
	}
	epoch, err := h.store.Beat(ctx, beatKeep)
	if err != nil {
		// The pings tell of Redis out of reach.
		h.log.DebugContext(ctx, "beat", "err", err)
		return
	}
	if before := h.epoch.Swap(&epoch); before != nil && *before != epoch {
		h.cache.clear()
		h.log.WarnContext(ctx, "redis lost the service's data since this process last beat (restarted without persistence, or flushed); the games cached here are dropped")
	}
}

// failedFor records a command begun at begun that failed for want of
// Redis (apierr.Transient), or for Redis refusing its write; a call the
// client gave up on proves nothing.
func (h *Handler) failedFor(ctx context.Context, begun time.Time, err error) {
	refused := redisx.WritesRefused(err)
	if err == nil || ctx.Err() != nil || !(apierr.Transient(err) || refused) {
		return
	}
	if h.outages.failed(begun.UnixMilli(), refused) {
		h.log.WarnContext(ctx, outageMessage(refused), "err", err)
	}
}

// outageMessage is the warning of an outage begun; refused: Redis
// answers, refusing writes.
func outageMessage(refused bool) string {
	if refused {
		return "redis refuses writes: the turns (and waits for a formation or a first move) under way are not charged the time until it takes them again"
	}
	return "redis out of reach: the turns (and waits for a formation or a first move) under way are not charged the time until it answers"
}

// excuseCached commits the excuse of each cached game in which something
// runs (model.Waiting) and has something to excuse.
func (h *Handler) excuseCached(ctx context.Context) {
	n := 0
	for _, st := range h.cache.running() {
		if ctx.Err() != nil {
			return
		}
		if _, due := h.excuse(st, h.now()); !due {
			continue
		}
		ok, err := h.excuseGame(ctx, st.ID)
		if err != nil {
			h.log.DebugContext(ctx, "excuse the outage", "game", st.ID, "err", err)
		}
		if ok {
			n++
		}
	}
	if n > 0 {
		h.log.InfoContext(ctx, "turns excused the outage", "games", n)
	}
}

// excuseGame commits the excuse of one game, if it has one due. A command
// committed meanwhile made its own.
func (h *Handler) excuseGame(ctx context.Context, id string) (bool, error) {
	// It holds the game's lock: a Redis slow to answer keeps the players'
	// own commands waiting no longer than this.
	ctx, cancel := context.WithTimeout(ctx, 2*reachTimeout)
	defer cancel()
	unlock, err := h.locks.lock(ctx, id)
	if err != nil {
		return false, err
	}
	defer unlock()
	l, err := h.load(ctx, id, "")
	if err != nil {
		return false, err
	}
	if err := writable(l.State); err != nil {
		return false, err
	}
	ch, ok := h.excuse(l.State, l.Now)
	if !ok {
		return false, nil
	}
	if _, err := h.commit(ctx, l.State, ch, command{id: id}, l.Now, nil); err != nil {
		return false, err
	}
	return true, nil
}
