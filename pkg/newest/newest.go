// Package newest keeps at most a few open streams per key (a seat, a
// player), ending the oldest when a newer one comes. A client that
// reconnects, as a phone changing networks does, leaves streams behind
// that the server has not yet seen die; refusing its new stream for them
// would lock it out, while its newest stream is the one it reads.
package newest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Limit keeps up to max streams per key, and up to max more on their way
// out.
type Limit[K comparable] struct {
	max  int
	mu   sync.Mutex
	open map[K][]*stream
	// leaving counts each key's streams that a newer one ended but that
	// have not been removed yet. A stream whose send waits for a client
	// that reads nothing never sees that it was ended, and holds its
	// place in the process until its connection goes: without this bound
	// such a client could take every place, one new stream at a time.
	leaving map[K]int
	// left is closed, and replaced, each time a stream is removed, open
	// or leaving: either makes room for one that waits.
	left chan struct{}
	// leaveWithin is how long Add waits for one to leave.
	leaveWithin time.Duration
}

// stream is one open stream; ended is closed when a newer stream of its
// key takes its place.
type stream struct {
	ended   chan struct{}
	removed bool
}

// New returns a Limit of n streams per key (at least one).
func New[K comparable](n int) *Limit[K] {
	return &Limit[K]{max: max(n, 1), open: make(map[K][]*stream), leaving: make(map[K]int), left: make(chan struct{}), leaveWithin: ReplacedLeaveWithin}
}

// Max is the number of streams a key may hold.
func (l *Limit[K]) Max() int { return l.max }

// ReplacedReason is the ErrorInfo reason of the status that ends a
// stream a newer one replaced: its client should not open it again, as it
// would only end the newer one in turn.
const ReplacedReason = "STREAM_REPLACED"

// ErrLeaving is Add's answer when a key holds max streams and max more
// that newer ones ended have not left yet: their client reads none of
// them.
var ErrLeaving = errors.New("the streams that newer ones replaced have not ended: their client reads none of them")

// Add registers a new stream of key, ending the key's oldest when it holds
// max already (evicted says so: that stream is on its way out). When max
// of its streams are on their way out already, it waits for one of them
// to leave, as one that is not stuck does within milliseconds, or for
// one of those open to end, and answers ErrLeaving if none has within
// ReplacedLeaveWithin, or ctx's error. ended is closed when a newer
// stream ends this one; remove takes the stream out again, and must be
// called once it ends.
func (l *Limit[K]) Add(ctx context.Context, key K) (ended <-chan struct{}, evicted bool, remove func(), err error) {
	var wait *time.Timer
	for {
		l.mu.Lock()
		list := l.open[key]
		if len(list) < l.max || l.leaving[key] < l.max {
			st := &stream{ended: make(chan struct{})}
			if len(list) >= l.max {
				close(list[0].ended)
				l.leaving[key]++
				list = list[1:]
				evicted = true
			}
			l.open[key] = append(list, st)
			l.mu.Unlock()
			return st.ended, evicted, func() { l.remove(key, st) }, nil
		}
		left := l.left
		l.mu.Unlock()
		if wait == nil {
			wait = time.NewTimer(l.leaveWithin)
			defer wait.Stop()
		}
		select {
		case <-left:
		case <-wait.C:
			return nil, false, nil, ErrLeaving
		case <-ctx.Done():
			return nil, false, nil, ctx.Err()
		}
	}
}

// remove takes st out of key's streams, or out of those leaving.
func (l *Limit[K]) remove(key K, st *stream) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st.removed {
		return
	}
	st.removed = true
	close(l.left)
	l.left = make(chan struct{})
	list := l.open[key]
	i := slices.Index(list, st)
	if i < 0 {
		// A newer stream ended it: it has left now.
		if l.leaving[key]--; l.leaving[key] <= 0 {
			delete(l.leaving, key)
		}
		return
	}
	list = append(list[:i:i], list[i+1:]...)
	if len(list) == 0 {
		delete(l.open, key)
	} else {
		l.open[key] = list
	}
}

// Keys is how many keys hold a stream, open or leaving.
func (l *Limit[K]) Keys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.open)
	for k := range l.leaving {
		if _, ok := l.open[k]; !ok {
			n++
		}
	}
	return n
}

// ErrFull is TakePlace's answer when every place is taken.
var ErrFull = errors.New("every place is taken")

// ReplacedLeaveWithin is how long TakePlace waits for the place of the
// stream a new one replaced, and Add for one of those leaving to leave:
// such a stream leaves at once unless a send to its (gone) client is
// blocked, or the machine is very busy.
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
