// Package newest keeps at most a few open streams per key (a seat, a
// player), ending the oldest when a newer one comes. A client that
// reconnects, as a phone changing networks does, leaves streams behind
// that the server has not yet seen die; refusing its new stream for them
// would lock it out, while its newest stream is the one it reads.
package newest

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Limit keeps up to max streams per key.
type Limit[K comparable] struct {
	max  int
	mu   sync.Mutex
	open map[K][]*stream
}

// stream is one open stream; ended is closed when a newer stream of its
// key takes its place.
type stream struct {
	ended chan struct{}
}

// New returns a Limit of n streams per key (at least one).
func New[K comparable](n int) *Limit[K] {
	return &Limit[K]{max: max(n, 1), open: make(map[K][]*stream)}
}

// Max is the number of streams a key may hold.
func (l *Limit[K]) Max() int { return l.max }

// ReplacedReason is the ErrorInfo reason of the status that ends a
// stream a newer one replaced: its client should not open it again, as it
// would only end the newer one in turn.
const ReplacedReason = "STREAM_REPLACED"

// Add registers a new stream of key, ending the key's oldest when it holds
// max already (evicted says so: that stream is on its way out). ended is
// closed when a newer stream ends this one; remove takes the stream out
// again, and must be called once it ends.
func (l *Limit[K]) Add(key K) (ended <-chan struct{}, evicted bool, remove func()) {
	st := &stream{ended: make(chan struct{})}
	l.mu.Lock()
	list := append(l.open[key], st)
	if len(list) > l.max {
		close(list[0].ended)
		list = list[1:]
		evicted = true
	}
	l.open[key] = list
	l.mu.Unlock()
	return st.ended, evicted, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		list := l.open[key]
		for i, o := range list {
			if o == st {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(l.open, key)
		} else {
			l.open[key] = list
		}
	}
}

// Keys is how many keys hold a stream.
func (l *Limit[K]) Keys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open)
}

// ErrFull is TakePlace's answer when every place is taken.
var ErrFull = errors.New("every place is taken")

// ReplacedLeaveWithin is how long TakePlace waits for the place of the
// stream a new one replaced: that one leaves at once unless a send to its
// (gone) client is blocked.
const ReplacedLeaveWithin = 5 * time.Second

// TakePlace takes one of places, a semaphore of a process's streams, or
// answers ErrFull. A stream that has just ended an older one of its key
// (replacing: Add's evicted) waits a little for that one's place, as it is
// leaving: a client reconnecting to a full server must not be refused for
// the streams it left behind.
func TakePlace(ctx context.Context, places chan<- struct{}, replacing bool) error {
	select {
	case places <- struct{}{}:
		return nil
	default:
	}
	if !replacing {
		return ErrFull
	}
	wait := time.NewTimer(ReplacedLeaveWithin)
	defer wait.Stop()
	select {
	case places <- struct{}{}:
		return nil
	case <-wait.C:
		return ErrFull
	case <-ctx.Done():
		return ctx.Err()
	}
}
