package handler

import (
	"testing"
	"time"
)

// TestOutages: the time of a turn within outages, the one under way
// counted up to the asking instant; a ping that fails after Redis was
// known to answer begins no outage; the oldest spans are dropped first.
func TestOutages(t *testing.T) {
	var o outages
	if o.within(0, 1000) != 0 {
		t.Fatal("no outage, yet time within one")
	}
	if !o.down(100) || o.down(150) {
		t.Fatal("down: the first failure begins the outage, and only it")
	}
	if got := o.within(0, 400); got != 300*time.Millisecond {
		t.Errorf("within the outage under way: %v, want 300ms", got)
	}
	if s := o.up(500); s != (span{100, 500}) {
		t.Fatalf("up: %v, want the span 100..500", s)
	}
	if s := o.up(600); s != (span{}) {
		t.Fatalf("up again: %v, want nothing ended", s)
	}
	// A ping sent at 450 that failed after the answer at 500 begins nothing.
	if o.down(450) {
		t.Fatal("a ping sent before the last answer began an outage")
	}
	o.down(1000)
	o.up(1200)
	for _, c := range []struct {
		from, to int64
		want     time.Duration
	}{
		{0, 2000, 600 * time.Millisecond},
		{300, 2000, 400 * time.Millisecond},
		{300, 1100, 300 * time.Millisecond},
		{500, 1000, 0},
		{1100, 1150, 50 * time.Millisecond},
	} {
		if got := o.within(c.from, c.to); got != c.want {
			t.Errorf("within(%d, %d) = %v, want %v", c.from, c.to, got, c.want)
		}
	}

	var many outages
	for i := range int64(maxOutages + 5) {
		many.down(10 * i)
		many.up(10*i + 5)
	}
	if len(many.spans) != maxOutages || many.spans[0] != (span{50, 55}) {
		t.Fatalf("%d spans from %v, want the newest %d", len(many.spans), many.spans[0], maxOutages)
	}
}
