package handler

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/logging"
	"github.com/palacehq/palace/pkg/rules"
)

// recorder is the presence's record function, keeping the sum per seat;
// every change announced unless silent is set (the seat held through
// another process).
type recorder struct {
	mu     sync.Mutex
	sum    map[seatKey]int
	calls  atomic.Int64
	silent atomic.Bool
}

func newRecorder() *recorder { return &recorder{sum: map[seatKey]int{}} }

func (r *recorder) record(_ context.Context, id string, side rules.Side, delta int) (announced bool) {
	r.calls.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sum[seatKey{id, side}] += delta
	return !r.silent.Load()
}

func (r *recorder) get(id string, side rules.Side) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sum[seatKey{id, side}]
}

func TestPresenceFoldsAQuickReconnection(t *testing.T) {
	ctx := context.Background()
	r := newRecorder()
	p := newPresence(time.Hour, r.record)
	p.opened(ctx, "g", rules.First)
	p.closed(ctx, "g", rules.First)
	p.opened(ctx, "g", rules.First)
	if got, calls := r.get("g", rules.First), r.calls.Load(); got != 1 || calls != 1 {
		t.Fatalf("after open, close, open: sum %d in %d records, want 1 in 1", got, calls)
	}
	// The other seat and other games are not folded together.
	p.closed(ctx, "g", rules.First)
	p.opened(ctx, "g", rules.Second)
	p.opened(ctx, "h", rules.First)
	if r.get("g", rules.Second) != 1 || r.get("h", rules.First) != 1 || r.get("g", rules.First) != 1 {
		t.Fatalf("sums %v", r.sum)
	}
	p.flush(ctx, 0)
	if got := r.get("g", rules.First); got != 0 {
		t.Fatalf("after flush the held-back disconnection is recorded: sum %d, want 0", got)
	}
}

// A client that opens its new stream before the old one is seen closing
// records nothing either, and neither does a seat's second stream.
func TestPresenceFoldsOverlappingStreams(t *testing.T) {
	ctx := context.Background()
	r := newRecorder()
	p := newPresence(time.Hour, r.record)
	p.opened(ctx, "g", rules.First)
	p.opened(ctx, "g", rules.First) // the reconnection, or a second device
	p.closed(ctx, "g", rules.First) // the old stream
	if got, calls := r.get("g", rules.First), r.calls.Load(); got != 1 || calls != 1 {
		t.Fatalf("overlapping streams: sum %d in %d records, want 1 in 1", got, calls)
	}
	p.closed(ctx, "g", rules.First)
	if got := r.get("g", rules.First); got != 1 {
		t.Fatalf("the last closing was not held back: sum %d", got)
	}
	p.closed(ctx, "g", rules.First) // a closing never opened here changes nothing
	p.flush(ctx, 0)
	if got, calls := r.get("g", rules.First), r.calls.Load(); got != 0 || calls != 2 {
		t.Fatalf("after flush: sum %d in %d records, want 0 in 2", got, calls)
	}
	if len(p.seats) != 0 {
		t.Fatalf("%d seats left after every stream closed", len(p.seats))
	}
}

func TestPresenceRecordsADisconnectionAfterTheGrace(t *testing.T) {
	ctx := context.Background()
	r := newRecorder()
	p := newPresence(20*time.Millisecond, r.record)
	p.opened(ctx, "g", rules.First)
	p.closed(ctx, "g", rules.First)
	if got := r.get("g", rules.First); got != 1 {
		t.Fatalf("disconnection recorded before the grace: sum %d", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.get("g", rules.First) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("disconnection never recorded")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A later opening is recorded: nothing is held back any more.
	p.opened(ctx, "g", rules.First)
	if got := r.get("g", rules.First); got != 1 {
		t.Fatalf("reopening after the grace: sum %d, want 1", got)
	}
}

func TestPresenceWithoutGraceAndAfterFlushRecordsAtOnce(t *testing.T) {
	ctx := context.Background()
	for _, stopped := range []bool{false, true} {
		r := newRecorder()
		grace := time.Duration(0)
		if stopped {
			grace = time.Hour
		}
		p := newPresence(grace, r.record)
		if stopped {
			p.flush(ctx, 0)
		}
		p.opened(ctx, "g", rules.First)
		p.closed(ctx, "g", rules.First)
		if got, calls := r.get("g", rules.First), r.calls.Load(); got != 0 || calls != 2 {
			t.Fatalf("stopped=%v: sum %d in %d records, want 0 in 2", stopped, got, calls)
		}
	}
}

// Streams of a few seats open and close at random, concurrently, some
// of their disconnections held back and some recorded: once flushed,
// every seat's sum is back to zero, whatever the interleaving.
func TestPresenceSumsStayRightUnderChurn(t *testing.T) {
	ctx := context.Background()
	r := newRecorder()
	p := newPresence(time.Millisecond, r.record)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 500 {
				side := rules.Side(rng.IntN(2))
				id := []string{"a", "b"}[rng.IntN(2)]
				p.opened(ctx, id, side)
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
				}
				p.closed(ctx, id, side)
			}
		})
	}
	wg.Wait()
	p.flush(ctx, 0)
	if len(p.seats) != 0 {
		t.Errorf("%d seats left after every stream closed", len(p.seats))
	}
	for _, id := range []string{"a", "b"} {
		for _, side := range []rules.Side{rules.First, rules.Second} {
			if got := r.get(id, side); got != 0 {
				t.Errorf("seat %s/%v: sum %d after every stream closed, want 0", id, side, got)
			}
		}
	}
	if r.calls.Load() >= 2*8*500 {
		t.Errorf("%d records for %d streams: no reconnection was folded", r.calls.Load(), 8*500)
	}
}

// TestAPresenceCutShortByItsClientIsNoWarning: a client that leaves while
// its stream's opening is being recorded (apps reconnect quickly, by the
// thousand after a rollout) cuts the record short; that is routine, so it
// is logged below a warning, and the change is still tried again.
func TestAPresenceCutShortByItsClientIsNoWarning(t *testing.T) {
	h := newRedisHandler(t)
	var logs logging.Buffer
	h.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	id, _, _ := newXiangqi(t, h)
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	h.record(gone, id, rules.First, 1, false)
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("a record cut short by its client was warned of:\n%s", logs.String())
	}
	h.retryMu.Lock()
	delta, again := h.retry[seatKey{id, rules.First}]
	h.retryMu.Unlock()
	if !again || delta != 1 {
		t.Fatalf("the change cut short is not to be tried again (retry %v, delta %d)", again, delta)
	}
}

// A stop leaves the closings it holds back to come due, for up to the
// wait it is given, and records what is left then: each closing once.
func TestPresenceFlushWaitsForTheGraceWithinItsWait(t *testing.T) {
	ctx := context.Background()
	r := newRecorder()
	p := newPresence(200*time.Millisecond, r.record)
	p.opened(ctx, "g", rules.First)
	p.closed(ctx, "g", rules.First)
	start := time.Now()
	p.flush(ctx, time.Hour)
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Errorf("flush returned after %v, before the closing's grace came", waited)
	}
	if got, calls := r.get("g", rules.First), r.calls.Load(); got != 0 || calls != 2 {
		t.Fatalf("after the grace: sum %d in %d records, want 0 in 2", got, calls)
	}

	r = newRecorder()
	p = newPresence(time.Hour, r.record)
	p.opened(ctx, "g", rules.First)
	p.closed(ctx, "g", rules.First)
	p.flush(ctx, 50*time.Millisecond)
	if got, calls := r.get("g", rules.First), r.calls.Load(); got != 0 || calls != 2 {
		t.Fatalf("past the wait: sum %d in %d records, want 0 in 2", got, calls)
	}
}

// A seat whose client keeps coming back is held longer each time: the
// hold of its closing doubles with each closing recorded lately, up to 64
// graces. A client reconnecting in a loop, each time just after it was
// announced disconnected, committed two events to its game's log per
// reconnection, without bound; the hold bounds it to a few an hour.
func TestPresenceHoldsAFlappingSeatLongerEachTime(t *testing.T) {
	ctx := context.Background()
	const grace = 10 * time.Millisecond
	recorded := make(chan int, 64)
	p := newPresence(grace, func(_ context.Context, _ string, _ rules.Side, delta int) bool { recorded <- delta; return true })
	for i := range 8 {
		p.opened(ctx, "g", rules.First)
		if d := <-recorded; d != 1 {
			t.Fatalf("cycle %d: recorded %d on opening", i, d)
		}
		closed := time.Now()
		p.closed(ctx, "g", rules.First)
		if d := <-recorded; d != -1 {
			t.Fatalf("cycle %d: recorded %d on closing", i, d)
		}
		want := grace * time.Duration(min(1<<i, maxHoldGraces))
		if held := time.Since(closed); held < want {
			t.Fatalf("closing %d of a seat that keeps coming back was held %v, want at least %v", i+1, held, want)
		}
	}
	// Another seat is held the grace alone. (The last closing's record
	// is counted until its callback returns, after its send above.)
	p.mu.Lock()
	for p.recording[seatKey{"g", rules.First}] > 0 {
		p.mu.Unlock()
		time.Sleep(time.Millisecond)
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	if held := p.hold(seatKey{"g", rules.Second}, time.Now()); held != grace {
		t.Errorf("the other seat's closing would be held %v, want the grace, %v", held, grace)
	}
	if want := grace * maxHoldGraces; p.hold(seatKey{"g", rules.First}, time.Now().Add(flapMemory*grace+time.Millisecond)) != grace {
		t.Errorf("the seat's hold did not come back to the grace once its closings were past %v (the longest hold is %v)", flapMemory*grace, want)
	}
}

// A closing that announced nothing (the seat held through another
// process: a player's second device) doubled the next closing's hold all
// the same: a player who had switched devices a few times was shown
// disconnected minutes late. Only the closings announced count.
func TestPresenceHoldsASeatLongerOnlyForClosingsAnnounced(t *testing.T) {
	ctx := context.Background()
	const grace = 10 * time.Millisecond
	silent := atomic.Bool{}
	silent.Store(true)
	recorded := make(chan int, 64)
	p := newPresence(grace, func(_ context.Context, _ string, _ rules.Side, delta int) bool {
		recorded <- delta
		return !silent.Load()
	})
	cycle := func() {
		p.opened(ctx, "g", rules.First)
		<-recorded
		p.closed(ctx, "g", rules.First)
		<-recorded
	}
	for range 4 {
		cycle()
	}
	holds := func() time.Duration {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.hold(seatKey{"g", rules.First}, time.Now())
	}
	// The last closing is taken back once its record returns.
	for deadline := time.Now().Add(2 * time.Second); holds() != grace; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 4 closings that announced nothing, the next would be held %v, want the grace, %v", holds(), grace)
		}
	}
	silent.Store(false)
	cycle()
	if held := holds(); held != 2*grace {
		t.Fatalf("after one closing announced, the next would be held %v, want twice the grace, %v", held, 2*grace)
	}
}

// A closing whose record announced nothing put back the seat's closings
// as they were before it was noted: a closing of the seat noted and
// announced meanwhile (the client back and gone again while the first
// record was slow) was erased with it, the next hold the bare grace.
func TestPresenceAClosingNotAnnouncedKeepsAnotherClosingsNote(t *testing.T) {
	ctx := context.Background()
	const grace = 10 * time.Millisecond
	release := make(chan struct{})
	started := make(chan int32, 16)
	var closings atomic.Int32
	p := newPresence(grace, func(_ context.Context, _ string, _ rules.Side, delta int) bool {
		if delta > 0 {
			return true
		}
		n := closings.Add(1)
		started <- n
		if n == 1 {
			// The first closing's record is slow, and finds the seat held
			// again by the time it runs: nothing announced.
			<-release
			return false
		}
		return true // the second closing is announced
	})
	k := seatKey{"g", rules.First}
	p.opened(ctx, "g", rules.First)
	p.closed(ctx, "g", rules.First)
	if n := <-started; n != 1 {
		t.Fatalf("closing %d first", n)
	}
	// The client is back while the first closing's record runs, and gone
	// again: a second timer of the same seat.
	p.opened(ctx, "g", rules.First)
	p.closed(ctx, "g", rules.First)
	if n := <-started; n != 2 {
		t.Fatalf("closing %d second", n)
	}
	// The second closing was noted before its record, which announced it.
	close(release)
	p.running.Wait()
	p.mu.Lock()
	held := p.hold(k, time.Now())
	p.mu.Unlock()
	if held != 2*grace {
		t.Fatalf("after one closing announced (and one that announced nothing), the next is held %v, want twice the grace, %v: the closing that announced nothing put back the seat's closings from before the announced one", held, 2*grace)
	}
}

// A closing that announced nothing, noted then taken back, left its time
// as the seat's last closing's: its older announced closings were
// remembered a whole memory (flapMemory graces) from it, their long hold
// kept while a player's phone kept reconnecting beside a second device.
func TestPresenceAClosingNotAnnouncedProlongsNoMemory(t *testing.T) {
	ctx := context.Background()
	const grace = 10 * time.Millisecond
	memory := flapMemory * grace // 2.56 s
	done := make(chan struct{}, 4)
	p := newPresence(grace, func(_ context.Context, _ string, _ rules.Side, delta int) bool {
		if delta > 0 {
			return true
		}
		defer func() { done <- struct{}{} }()
		return false // the seat is held through another process: nothing announced
	})
	k := seatKey{"g", rules.First}
	// Three closings announced, the last one just inside the memory.
	oldLast := time.Now().Add(-memory / 2)
	p.mu.Lock()
	p.lately[k] = closings{n: 3, last: oldLast}
	p.mu.Unlock()

	p.opened(ctx, "g", rules.First)
	p.closed(ctx, "g", rules.First)
	<-done
	p.running.Wait()

	// Just after the announced closings leave the memory, no closing has
	// been announced lately: the hold is the bare grace.
	at := oldLast.Add(memory + time.Millisecond)
	p.mu.Lock()
	held := p.hold(k, at)
	c := p.lately[k]
	p.mu.Unlock()
	if held != grace {
		t.Fatalf("%v after the last announced closing (memory %v), the hold is %v, want the grace %v: "+
			"the unannounced closing's take-back left lately[k] = {n:%d, last moved %v forward}",
			at.Sub(oldLast), memory, held, grace, c.n, c.last.Sub(oldLast).Round(time.Millisecond))
	}
}

// A closing that announced nothing, its record slower than the memory,
// took back the note of a closing announced meanwhile, noted afresh: the
// next closing was held the bare grace, not twice.
func TestPresenceASlowClosingNotAnnouncedKeepsAFreshNote(t *testing.T) {
	ctx := context.Background()
	const grace = time.Millisecond
	memory := flapMemory * grace // 256 ms
	release := make(chan struct{})
	started := make(chan int32, 16)
	var n atomic.Int32
	p := newPresence(grace, func(_ context.Context, _ string, _ rules.Side, delta int) bool {
		if delta > 0 {
			return true
		}
		i := n.Add(1)
		started <- i
		if i == 1 {
			<-release // slow, and finds nothing to announce
			return false
		}
		return true
	})
	k := seatKey{"g", rules.First}
	p.opened(ctx, "g", rules.First)
	p.closed(ctx, "g", rules.First)
	if i := <-started; i != 1 {
		t.Fatalf("closing %d first", i)
	}
	// The first record is still running when its note leaves the memory.
	time.Sleep(memory + 50*time.Millisecond)
	p.opened(ctx, "g", rules.First)
	p.closed(ctx, "g", rules.First)
	if i := <-started; i != 2 {
		t.Fatalf("closing %d second", i)
	}
	// The second closing was noted afresh (n = 1) before its record,
	// which announces it.
	close(release)
	p.running.Wait()
	p.mu.Lock()
	held := p.hold(k, time.Now())
	_, noted := p.lately[k]
	p.mu.Unlock()
	if held != 2*grace {
		t.Fatalf("after one closing announced lately, the next is held %v, want %v (note kept: %v): "+
			"the first closing's take-back removed the announced closing's note", held, 2*grace, noted)
	}
}
