package handler

import (
	"sync/atomic"
	"time"
)

// seldom lets a warning through at most once a minute, so that a client
// that repeats what caused it cannot fill the log.
type seldom struct{ last atomic.Int64 }

// Allow reports whether a warning may be logged at now.
func (s *seldom) Allow(now time.Time) bool {
	last := s.last.Load()
	if last != 0 && now.Sub(time.Unix(0, last)) < time.Minute {
		return false
	}
	return s.last.CompareAndSwap(last, now.UnixNano())
}
