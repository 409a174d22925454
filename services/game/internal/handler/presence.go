package handler

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/palacehq/palace/pkg/rules"
)

// presence holds back a seat stream's disconnection for a grace period,
// so that a stream which reconnects to this process in time (a phone
// changing networks, a client's reconnect after a dropped connection)
// records nothing: the opponent sees no "disconnected" then "connected",
// and the game takes no two extra commits racing its moves. A
// reconnection that lands on another process is recorded there, and the
// held-back disconnection here, so the seat's count of open streams stays
// right either way.
type presence struct {
	grace time.Duration
	// record commits a change of a seat's open streams by delta.
	record func(ctx context.Context, id string, side rules.Side, delta int)

	mu      sync.Mutex
	pending map[seatKey][]*time.Timer
	stopped bool
	// running counts held-back disconnections not yet recorded or
	// cancelled, so flush can wait for the ones already under way.
	running sync.WaitGroup
}

type seatKey struct {
	id   string
	side rules.Side
}

func newPresence(grace time.Duration, record func(ctx context.Context, id string, side rules.Side, delta int)) *presence {
	return &presence{grace: grace, record: record, pending: map[seatKey][]*time.Timer{}}
}

// opened records a seat stream's opening, unless it cancels a held-back
// disconnection of the same seat.
func (p *presence) opened(ctx context.Context, id string, side rules.Side) {
	k := seatKey{id, side}
	p.mu.Lock()
	if ts := p.pending[k]; len(ts) > 0 && ts[len(ts)-1].Stop() {
		p.dropLocked(k, ts[len(ts)-1])
		p.mu.Unlock()
		p.running.Done()
		return
	}
	p.mu.Unlock()
	p.record(ctx, id, side, 1)
}

// closed records a seat stream's closing after the grace period.
func (p *presence) closed(ctx context.Context, id string, side rules.Side) {
	k := seatKey{id, side}
	p.mu.Lock()
	if p.grace <= 0 || p.stopped {
		p.mu.Unlock()
		p.record(ctx, id, side, -1)
		return
	}
	p.running.Add(1)
	var t *time.Timer
	// The callback takes the lock before it reads t, and t is set before
	// the lock is released.
	t = time.AfterFunc(p.grace, func() {
		defer p.running.Done()
		p.mu.Lock()
		p.dropLocked(k, t)
		p.mu.Unlock()
		p.record(ctx, id, side, -1)
	})
	p.pending[k] = append(p.pending[k], t)
	p.mu.Unlock()
}

func (p *presence) dropLocked(k seatKey, t *time.Timer) {
	ts := slices.DeleteFunc(p.pending[k], func(x *time.Timer) bool { return x == t })
	if len(ts) == 0 {
		delete(p.pending, k)
		return
	}
	p.pending[k] = ts
}

// flush records every held-back disconnection now and makes later ones
// immediate: a process that stops must not leave seats connected.
func (p *presence) flush(ctx context.Context) {
	p.mu.Lock()
	p.stopped = true
	var due []seatKey
	for k, ts := range p.pending {
		for _, t := range ts {
			if t.Stop() {
				due = append(due, k)
				p.running.Done()
			}
		}
	}
	clear(p.pending)
	p.mu.Unlock()
	for _, k := range due {
		p.record(ctx, k.id, k.side, -1)
	}
	p.running.Wait()
}
