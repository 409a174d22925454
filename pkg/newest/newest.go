// Package newest keeps at most a few open streams per key (a seat, a
// player), ending the oldest when a newer one comes. A client that
// reconnects, as a phone changing networks does, leaves streams behind
// that the server has not yet seen die; refusing its new stream for them
// would lock it out, while its newest stream is the one it reads.
package newest

import "sync"

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

// Add registers a new stream of key, ending the key's oldest when it holds
// max already. ended is closed when a newer stream ends this one; remove
// takes the stream out again, and must be called once it ends.
func (l *Limit[K]) Add(key K) (ended <-chan struct{}, remove func()) {
	st := &stream{ended: make(chan struct{})}
	l.mu.Lock()
	list := append(l.open[key], st)
	if len(list) > l.max {
		close(list[0].ended)
		list = list[1:]
	}
	l.open[key] = list
	l.mu.Unlock()
	return st.ended, func() {
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
