package handler

import (
	"sync"

	"github.com/palacehq/palace/pkg/rules"
)

// seatLimit keeps the open event streams of each seat in this process,
// so that a seat holds at most max of them. A new stream ends the seat's
// oldest rather than being refused: a client that reconnects (a phone
// changing networks) leaves streams behind that the server has not yet
// seen die, and its newest stream is the one it reads.
type seatLimit struct {
	max  int
	mu   sync.Mutex
	open map[seatKey][]*seatStream
}

// seatStream is one stream of a seat; ended is closed when a newer stream
// of the seat takes its place.
type seatStream struct {
	ended chan struct{}
}

func newSeatLimit(max int) *seatLimit {
	return &seatLimit{max: max, open: make(map[seatKey][]*seatStream)}
}

// add registers a new stream of the seat, ending its oldest when the seat
// already holds max; remove takes the stream out again.
func (s *seatLimit) add(game string, side rules.Side) (st *seatStream, remove func()) {
	key := seatKey{game, side}
	st = &seatStream{ended: make(chan struct{})}
	s.mu.Lock()
	list := append(s.open[key], st)
	if len(list) > s.max {
		close(list[0].ended)
		list = list[1:]
	}
	s.open[key] = list
	s.mu.Unlock()
	return st, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		list := s.open[key]
		for i, o := range list {
			if o == st {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(s.open, key)
		} else {
			s.open[key] = list
		}
	}
}
