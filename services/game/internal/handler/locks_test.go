package handler

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestGameLocksQueueOneGameAndLetWaitersGiveUp(t *testing.T) {
	l := newGameLocks()
	unlock, err := l.lock(context.Background(), "g1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := l.lock(context.Background(), "g2")
	if err != nil {
		t.Fatalf("another game waited: %v", err)
	}
	other()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.lock(ctx, "g1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second holder of g1: %v, want to wait until the deadline", err)
	}
	got := make(chan struct{})
	go func() {
		u, err := l.lock(context.Background(), "g1")
		if err == nil {
			u()
		}
		close(got)
	}()
	unlock()
	<-got
	if n := len(l.m); n != 0 {
		t.Fatalf("%d locks left behind", n)
	}
}
