package newest

import "testing"

func ended(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestTheOldestGoes: a key holds max streams; the next ends its oldest,
// not another key's, and removed streams make room again.
func TestTheOldestGoes(t *testing.T) {
	l := New[string](2)
	a1, rmA1 := l.Add("a")
	a2, rmA2 := l.Add("a")
	b1, rmB1 := l.Add("b")
	if ended(a1) || ended(a2) || ended(b1) {
		t.Fatal("a stream ended within the limit")
	}
	a3, rmA3 := l.Add("a")
	if !ended(a1) || ended(a2) || ended(a3) || ended(b1) {
		t.Fatalf("after a third stream of a: ended %v %v %v, b %v; want only the first", ended(a1), ended(a2), ended(a3), ended(b1))
	}
	rmA1() // an ended stream removes itself: nothing more happens
	rmA2()
	a4, rmA4 := l.Add("a")
	if ended(a3) || ended(a4) {
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
	first, _ := l.Add(1)
	if ended(first) || l.Max() != 1 {
		t.Fatalf("max %d; first ended %v", l.Max(), ended(first))
	}
	l.Add(1)
	if !ended(first) {
		t.Fatal("a second stream left the first open")
	}
}
