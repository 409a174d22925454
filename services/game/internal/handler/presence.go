package handler

import (
	"context"
	"sync"
	"time"

	"github.com/palacehq/palace/pkg/rules"
)

// presence records a seat's streams opening and closing as changes of the
// seat's count of open streams, which the game's state keeps and its
// events announce. It folds what needs no announcing: a seat's second
// stream in this process records nothing (only the first opening and the
// last closing here do), and the last closing is held back for a grace
// period, so that a stream which reconnects to this process in time (a
// phone changing networks, a client's reconnect after a dropped
// connection, in either order) records nothing either: the opponent sees
// no "disconnected" then "connected", and the game takes no two extra
// commits racing its moves. The count is thus of processes with streams
// of the seat, and stays right whichever process a reconnection reaches.
type presence struct {
	grace time.Duration
	// record commits a change of a seat's count by delta.
	record func(ctx context.Context, id string, side rules.Side, delta int) (announced bool)

	mu      sync.Mutex
	seats   map[seatKey]*seatStreams
	stopped bool
	// lately counts, per seat, the closings announced here in the last
	// flapMemory graces: each one doubles the hold of the seat's next
	// closing, up to maxHoldGraces graces, so that a client reconnecting
	// in a loop commits a few presence events an hour to its game's log,
	// not two per reconnection, and a flaky connection is shown
	// connected while it keeps coming back. A closing that announced
	// nothing (the seat held through another process: a player's second
	// device) adds nothing to the log, and does not count.
	lately map[seatKey]closings
	// pruning is set while a timer to forget old closings runs.
	pruning bool
	// recording counts, per seat, the closings being recorded, which
	// count as announced for a closing held meanwhile.
	recording map[seatKey]int
	// running counts held-back closings not yet recorded or cancelled,
	// so flush can wait for the ones already under way.
	running sync.WaitGroup
}

// closings is a seat's recent closings announced here: how many, the
// last when.
type closings struct {
	n    int
	last time.Time
}

const (
	// maxHoldGraces bounds the hold of a flapping seat's closing: 64
	// graces, 3 min 12 s by default.
	maxHoldGraces = 64
	// flapMemory is how long, in graces, a seat's announced closings
	// lengthen its hold: longer than the longest hold, so that a client
	// that comes back just after it is still held that long.
	flapMemory = 4 * maxHoldGraces
)

type seatKey struct {
	id   string
	side rules.Side
}

// seatStreams is a seat's streams in this process.
type seatStreams struct {
	open int
	// pending holds back the recording of the last closing.
	pending *time.Timer
}

func newPresence(grace time.Duration, record func(ctx context.Context, id string, side rules.Side, delta int) (announced bool)) *presence {
	return &presence{grace: grace, record: record, seats: map[seatKey]*seatStreams{}, lately: map[seatKey]closings{}, recording: map[seatKey]int{}}
}

// opened records a seat stream's opening when it is the seat's first
// here and does not cancel a held-back closing.
func (p *presence) opened(ctx context.Context, id string, side rules.Side) {
	k := seatKey{id, side}
	p.mu.Lock()
	s := p.seats[k]
	if s == nil {
		s = &seatStreams{}
		p.seats[k] = s
	}
	s.open++
	if s.open > 1 {
		p.mu.Unlock()
		return
	}
	if t := s.pending; t != nil {
		s.pending = nil
		if t.Stop() {
			p.mu.Unlock()
			p.running.Done()
			return
		}
		// Too late: the closing is being recorded, so is this opening.
	}
	p.mu.Unlock()
	p.record(ctx, id, side, 1)
}

// closed records the seat's last stream here closing, after the grace
// period.
func (p *presence) closed(ctx context.Context, id string, side rules.Side) {
	k := seatKey{id, side}
	p.mu.Lock()
	s := p.seats[k]
	if s == nil || s.open == 0 {
		p.mu.Unlock()
		return // not opened through presence: nothing to undo
	}
	if s.open--; s.open > 0 {
		p.mu.Unlock()
		return
	}
	if p.grace <= 0 || p.stopped {
		delete(p.seats, k)
		p.mu.Unlock()
		p.record(ctx, id, side, -1)
		return
	}
	p.running.Add(1)
	var t *time.Timer
	// The callback takes the lock before it reads t, and t is set before
	// the lock is released.
	t = time.AfterFunc(p.hold(k, time.Now()), func() {
		defer p.running.Done()
		p.mu.Lock()
		if s.pending == t {
			s.pending = nil
		}
		if s.open == 0 && s.pending == nil && p.seats[k] == s {
			delete(p.seats, k)
		}
		p.recording[k]++
		p.mu.Unlock()
		at := time.Now()
		announced := p.record(ctx, id, side, -1)
		p.mu.Lock()
		if p.recording[k]--; p.recording[k] <= 0 {
			delete(p.recording, k)
		}
		if announced {
			p.closedLately(k, at)
		}
		p.mu.Unlock()
	})
	s.pending = t
	p.mu.Unlock()
}

// hold is how long the seat's closing is held back at now: the grace,
// doubled for each of its closings announced lately. Called with p.mu held.
func (p *presence) hold(k seatKey, now time.Time) time.Duration {
	return p.grace * time.Duration(min(1<<min(p.recent(k, now)+p.recording[k], 30), maxHoldGraces))
}

// recent is how many of the seat's closings at now are recent. Called
// with p.mu held.
func (p *presence) recent(k seatKey, now time.Time) int {
	if c := p.lately[k]; now.Sub(c.last) <= flapMemory*p.grace {
		return c.n
	}
	return 0
}

// closedLately notes a closing of the seat announced at now. Called with
// p.mu held; now may be before the last closing noted (records end in any
// order), which stays the last.
func (p *presence) closedLately(k seatKey, now time.Time) {
	last := now
	if c, ok := p.lately[k]; ok && c.last.After(now) {
		last = c.last
	}
	p.lately[k] = closings{n: p.recent(k, now) + 1, last: last}
	if !p.pruning {
		p.pruning = true
		time.AfterFunc(flapMemory*p.grace, p.forgetOldClosings)
	}
}

// forgetOldClosings forgets the seats whose closings are no longer recent,
// once every memory while any is noted: a process gone quiet after a busy
// spell keeps none of them.
func (p *presence) forgetOldClosings() {
	memory := flapMemory * p.grace
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, c := range p.lately {
		if now.Sub(c.last) > memory {
			delete(p.lately, k)
		}
	}
	if p.pruning = len(p.lately) > 0; p.pruning {
		time.AfterFunc(memory, p.forgetOldClosings)
	}
}

// ended drops a stream that delivered its game's end without recording
// anything (presence stops with the game), and reports whether it was its
// seat's last stream here.
func (p *presence) ended(id string, side rules.Side) bool {
	k := seatKey{id, side}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.seats[k]
	if s == nil || s.open == 0 {
		return false
	}
	if s.open--; s.open > 0 {
		return false
	}
	if s.pending == nil {
		delete(p.seats, k)
	}
	return true
}

// holds reports whether this process holds the seat: a stream of it is
// open here, or its closing is held back.
func (p *presence) holds(k seatKey) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.seats[k]
	return s != nil && (s.open > 0 || s.pending != nil)
}

// held lists the seats this process holds: those with a stream open here,
// or whose closing is held back.
func (p *presence) held() []seatKey {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]seatKey, 0, len(p.seats))
	for k, s := range p.seats {
		if s.open > 0 || s.pending != nil {
			out = append(out, k)
		}
	}
	return out
}

// flush records every held-back closing, and makes later ones immediate:
// a process that stops must not leave seats connected. Closings held back
// are first left to come due, for up to wait, as they would in a running
// process: a stop ends every stream it serves, and their clients
// reconnect to another process within the grace, which then announces
// nothing, where recording them at once showed every player the process
// served disconnected, then connected again.
func (p *presence) flush(ctx context.Context, wait time.Duration) {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-doneOf(&p.running):
		case <-t.C:
		}
		t.Stop()
	}
	p.mu.Lock()
	var due []seatKey
	for k, s := range p.seats {
		if s.pending != nil && s.pending.Stop() {
			due = append(due, k)
			p.running.Done()
			s.pending = nil
		}
		if s.open == 0 && s.pending == nil {
			delete(p.seats, k)
		}
	}
	p.mu.Unlock()
	for _, k := range due {
		p.record(ctx, k.id, k.side, -1)
	}
	p.running.Wait()
}

// doneOf is a channel closed once wg's count is down to zero.
func doneOf(wg *sync.WaitGroup) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}
