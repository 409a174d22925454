package newest

import (
	"context"
	"errors"
	"testing"
	"time"
)

func ended(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// add is l.Add of a stream it must admit.
func add[K comparable](t *testing.T, l *Limit[K], key K) (<-chan struct{}, bool, func()) {
	t.Helper()
	ended, evicted, remove, err := l.Add(context.Background(), key)
	if err != nil {
		t.Fatalf("a stream of %v: %v", key, err)
	}
	return ended, evicted, remove
}

// TestStreamsThatDoNotLeaveAreBounded: a stream that a newer one ended
// but that has not left (its send waits for a client that reads nothing)
// counts as leaving; a key holds at most max streams and max leaving, so
// the next one is refused until one of those leaves.
func TestStreamsThatDoNotLeaveAreBounded(t *testing.T) {
	l := New[string](2)
	l.leaveWithin = 20 * time.Millisecond
	var removes []func()
	for i := range 4 {
		_, evicted, rm := add(t, l, "a")
		if evicted != (i >= 2) {
			t.Fatalf("stream %d: evicted %v", i, evicted)
		}
		removes = append(removes, rm)
	}
	// Two open, two ended that have not left.
	if _, _, _, err := l.Add(context.Background(), "a"); !errors.Is(err, ErrLeaving) {
		t.Fatalf("a fifth stream beside two that have not left: %v, want ErrLeaving", err)
	}
	add(t, l, "b") // other keys are not concerned
	removes[0]()
	removes[0]() // removing twice changes nothing
	_, evicted, rm := add(t, l, "a")
	if !evicted {
		t.Fatal("a stream once one of those leaving left: not evicting the oldest open")
	}
	if _, _, _, err := l.Add(context.Background(), "a"); !errors.Is(err, ErrLeaving) {
		t.Fatalf("once more at the bound: %v, want ErrLeaving", err)
	}
	for _, rm := range append(removes[1:], rm) {
		rm()
	}
	if n := l.Keys(); n != 1 {
		t.Fatalf("%d keys held, want b's alone", n)
	}
}

// TestTheOldestGoes: a key holds max streams; the next ends its oldest,
// not another key's, and removed streams make room again.
func TestTheOldestGoes(t *testing.T) {
	l := New[string](2)
	a1, e1, rmA1 := add(t, l, "a")
	a2, _, rmA2 := add(t, l, "a")
	b1, _, rmB1 := add(t, l, "b")
	if ended(a1) || ended(a2) || ended(b1) {
		t.Fatal("a stream ended within the limit")
	}
	a3, e3, rmA3 := add(t, l, "a")
	if e1 || !e3 {
		t.Fatalf("evicted: first %v, third %v; want only the third to say so", e1, e3)
	}
	if !ended(a1) || ended(a2) || ended(a3) || ended(b1) {
		t.Fatalf("after a third stream of a: ended %v %v %v, b %v; want only the first", ended(a1), ended(a2), ended(a3), ended(b1))
	}
	rmA1() // an ended stream removes itself: nothing more happens
	rmA2()
	a4, e4, rmA4 := add(t, l, "a")
	if e4 || ended(a3) || ended(a4) {
		t.Fatal("a stream ended although one was removed to make room")
	}
	for _, rm := range []func(){rmA3, rmA4, rmB1} {
		rm()
	}
	if n := l.Keys(); n != 0 {
		t.Fatalf("%d keys held after every stream was removed", n)
	}
}

// TestAtLeastOne: a limit below one keeps one stream per key.
func TestAtLeastOne(t *testing.T) {
	l := New[int](0)
	first, _, _ := add(t, l, 1)
	if ended(first) || l.Max() != 1 {
		t.Fatalf("max %d; first ended %v", l.Max(), ended(first))
	}
	add(t, l, 1)
	if !ended(first) {
		t.Fatal("a second stream left the first open")
	}
}

// TestTakePlace: a full semaphore refuses a new stream at once, while one
// that replaced an older stream waits for that one's place.
func TestTakePlace(t *testing.T) {
	places := make(chan struct{}, 1)
	if err := TakePlace(context.Background(), places, false); err != nil {
		t.Fatal(err)
	}
	if err := TakePlace(context.Background(), places, false); !errors.Is(err, ErrFull) {
		t.Fatalf("a full semaphore: %v, want ErrFull", err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		<-places // the replaced stream leaves
	}()
	if err := TakePlace(context.Background(), places, true); err != nil {
		t.Fatalf("a replacing stream: %v, want the replaced one's place", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := TakePlace(ctx, places, true); !errors.Is(err, context.Canceled) {
		t.Fatalf("a replacing stream whose call ended: %v", err)
	}
}

// TestRemovingTheOldestKeepsTheNewer: a stream that ends by itself leaves
// the key's newer ones counted, so that the next past the limit still
// ends the oldest of them.
func TestRemovingTheOldestKeepsTheNewer(t *testing.T) {
	l := New[string](2)
	_, _, rmA1 := add(t, l, "a")
	a2, _, _ := add(t, l, "a")
	rmA1()
	a3, e3, _ := add(t, l, "a")
	if e3 || ended(a2) {
		t.Fatal("a stream ended although the key held one fewer than its limit")
	}
	_, e4, _ := add(t, l, "a")
	if !e4 || !ended(a2) || ended(a3) {
		t.Fatalf("a third open stream: evicted %v, oldest ended %v, newer ended %v; want the oldest ended", e4, ended(a2), ended(a3))
	}
}

// TestTakePlaceRefusesANewStreamWithoutWaiting: only a replacing stream
// waits for a place; any other is refused at once, even when its call has
// ended meanwhile.
func TestTakePlaceRefusesANewStreamWithoutWaiting(t *testing.T) {
	places := make(chan struct{}, 1)
	places <- struct{}{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := TakePlace(ctx, places, false); !errors.Is(err, ErrFull) {
		t.Fatalf("a full semaphore, not replacing: %v, want ErrFull without a wait", err)
	}
}

// TestAStreamAboutToLeaveIsWaitedFor: a client that closes its streams
// and opens new ones faster than the server sees the old ones go has its
// new stream wait for one to leave, not refused; a wait its caller gives
// up ends with the caller's error.
func TestAStreamAboutToLeaveIsWaitedFor(t *testing.T) {
	l := New[string](1)
	_, _, rm1 := add(t, l, "a")
	add(t, l, "a") // the first is on its way out
	time.AfterFunc(50*time.Millisecond, rm1)
	begun := time.Now()
	_, evicted, _ := add(t, l, "a")
	if !evicted || time.Since(begun) < 40*time.Millisecond {
		t.Fatalf("evicted %v after %v: want the oldest open ended once the leaving one left", evicted, time.Since(begun))
	}
	// Now the second is leaving, and stays.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, _, err := l.Add(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait given up: %v, want the caller's error", err)
	}
}

// TestAStreamWaitingForRoomTakesItWhenAnOpenOneEnds: a new stream waits
// while its key holds max open streams and max leaving; an open one that
// ends (its client closed it) makes room as surely as one leaving that
// leaves, and the waiting stream takes it at once, not after the wait.
func TestAStreamWaitingForRoomTakesItWhenAnOpenOneEnds(t *testing.T) {
	l := New[string](1)
	l.leaveWithin = 2 * time.Second
	add(t, l, "a") // stays on its way out: its client reads nothing
	_, _, rmOpen := add(t, l, "a")
	time.AfterFunc(50*time.Millisecond, rmOpen)
	begun := time.Now()
	_, evicted, _, err := l.Add(context.Background(), "a")
	if err != nil || evicted {
		t.Fatalf("a stream once the open one ended: evicted %v, %v; want it admitted beside none", evicted, err)
	}
	if took := time.Since(begun); took > time.Second {
		t.Fatalf("admitted %v after the open stream ended; want at once", took)
	}
}

// TestAWaitForALeavingStreamIsBoundedWhateverElseLeaves: a key's new
// stream beside max streams that do not leave is refused after the wait,
// though the streams of other keys come and go meanwhile, as they do on a
// busy server all the time.
func TestAWaitForALeavingStreamIsBoundedWhateverElseLeaves(t *testing.T) {
	l := New[string](1)
	l.leaveWithin = 200 * time.Millisecond
	add(t, l, "a")
	add(t, l, "a") // the first stays on its way out
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			_, _, older, err1 := l.Add(context.Background(), "b")
			_, _, newer, err2 := l.Add(context.Background(), "b") // the older leaving
			if err1 != nil || err2 != nil {
				return
			}
			older()
			newer()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, _, _, err := l.Add(ctx, "a"); !errors.Is(err, ErrLeaving) {
		t.Fatalf("a stream beside one that does not leave, while others leave: %v, want ErrLeaving within the wait", err)
	}
}
