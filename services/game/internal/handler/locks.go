package handler

import (
	"context"
	"fmt"
	"sync"
)

// gameLocks queues the commands of one game within this process. Without
// it, commands on a busy game (moves racing presence updates from
// reconnecting streams) each read the same version and all but one lose
// the compare-and-set, so one unlucky command can lose every attempt. The
// compare-and-set in Redis still guards against other processes.
type gameLocks struct {
	mu sync.Mutex
	m  map[string]*gameLock
}

type gameLock struct {
	token chan struct{}
	refs  int
}

func newGameLocks() *gameLocks {
	return &gameLocks{m: make(map[string]*gameLock)}
}

// lock waits for game id's turn, or for ctx to end, and returns the
// function that releases it.
func (l *gameLocks) lock(ctx context.Context, id string) (func(), error) {
	l.mu.Lock()
	gl := l.m[id]
	if gl == nil {
		gl = &gameLock{token: make(chan struct{}, 1)}
		l.m[id] = gl
	}
	gl.refs++
	l.mu.Unlock()
	select {
	case gl.token <- struct{}{}:
		return func() {
			<-gl.token
			l.release(id, gl)
		}, nil
	case <-ctx.Done():
		l.release(id, gl)
		return nil, fmt.Errorf("waiting for game %s: %w", id, ctx.Err())
	}
}

func (l *gameLocks) release(id string, gl *gameLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	gl.refs--
	if gl.refs == 0 {
		delete(l.m, id)
	}
}
