package store_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// scriptKeys returns the keys of an EVAL or EVALSHA call, nil for any
// other command.
func scriptKeys(cmd redis.Cmder) []string {
	a := cmd.Args()
	if len(a) < 3 || (cmd.Name() != "evalsha" && cmd.Name() != "eval") {
		return nil
	}
	var n int
	switch v := a[2].(type) {
	case int:
		n = v
	case int64:
		n = int(v)
	default:
		return nil
	}
	if len(a) < 3+n {
		return nil
	}
	keys := make([]string, n)
	for i := range n {
		keys[i], _ = a[3+i].(string)
	}
	return keys
}

// isEnterScript tells the enter script's call (enter.lua: five keys, the
// fourth a ticket, the fifth a request).
func isEnterScript(cmd redis.Cmder) bool {
	k := scriptKeys(cmd)
	return len(k) == 5 && strings.Contains(k[3], ":t:") && strings.Contains(k[4], ":r:")
}

// lostReply runs the first enter script, then loses its reply (a read
// timeout, a connection reset, a WAIT for replicas that fails): the
// ticket is written, and the caller hears an error.
type lostReply struct{ done atomic.Bool }

func (l *lostReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (l *lostReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && isEnterScript(cmd) && l.done.CompareAndSwap(false, true) {
			lost := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
			cmd.SetErr(lost)
			return lost
		}
		return err
	}
}
func (l *lostReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// pauseBeforeEnter holds the first enter script until released.
type pauseBeforeEnter struct {
	once    atomic.Bool
	reached chan struct{}
	release chan struct{}
}

func (p *pauseBeforeEnter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (p *pauseBeforeEnter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isEnterScript(cmd) && p.once.CompareAndSwap(false, true) {
			close(p.reached)
			<-p.release
		}
		return next(ctx, cmd)
	}
}
func (p *pauseBeforeEnter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func twoPools() (store.Pool, store.Pool) {
	return store.Pool{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Control: clock.Default(), Rated: true},
		store.Pool{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Control: clock.Default()}
}

func entryOf(p string, at time.Time) store.Ticket {
	return store.Ticket{Player: p, Name: p, Rating: 1200, Entered: at, Expires: at.Add(10 * time.Minute)}
}

// pairingsOf pairs p's tickets in x and y with fresh opponents and counts
// the matches p is in: more than one is two games at once.
func pairingsOf(t *testing.T, st *store.Store, x, y store.Pool, now time.Time) int {
	t.Helper()
	ctx := context.Background()
	for i, pool := range []store.Pool{x, y} {
		opp := []string{"q", "r"}[i]
		if _, _, err := st.Enter(ctx, pool, entryOf(opp, now), "o", 2*time.Hour, nil); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, r := range st.Pair(ctx, []store.Pool{x, y}, store.PairParams{Now: now, BaseWindow: 100, MaxPairs: 10, Keep: time.Hour}) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		for _, m := range r.Matches {
			if m.PlayerA.ID == "p" || m.PlayerB.ID == "p" {
				n++
			}
		}
	}
	return n
}

// An entry whose script ran but whose answer was lost (a reset
// connection, a WAIT for replicas that failed: the client hears
// Unavailable and retries with the same request_id) has written its
// ticket, which waits. The player's live-ticket record keeps naming it,
// though no answer told the entry so, and the retry, answered from the
// request, does not record it again: an entry of the player to another
// pool is answered BusyElsewhere with it, so the player is never paired
// in two pools at once.
func TestAnEntryWhoseAnswerWasLostKeepsThePlayerInOnePool(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	now := time.Now()
	x, y := twoPools()

	lossy := redistest.Client(t)
	lossy.AddHook(&lostReply{})
	if id, out, err := store.New(lossy, prefix).Enter(ctx, x, entryOf("p", now), "r1", 2*time.Hour, nil); err == nil {
		t.Fatalf("the lost reply was not seen: %s %v", id, out)
	}
	// The retry (same request id) finds the ticket: it was written.
	tX, out, err := st.Enter(ctx, x, entryOf("p", now.Add(time.Second)), "r1", 2*time.Hour, nil)
	if err != nil || out != store.Duplicate {
		t.Fatalf("retry: %s %v %v, want Duplicate", tX, out, err)
	}
	if tk, err := st.Ticket(ctx, tX); err != nil || tk.State != store.StateWaiting {
		t.Fatalf("ticket %s: %+v %v", tX, tk, err)
	}

	later := now.Add(11 * time.Second) // past claimGrace
	tY, out, err := st.Enter(ctx, y, entryOf("p", later), "r2", 2*time.Hour, nil)
	if err == nil && out == store.BusyElsewhere && tY == tX {
		return
	}
	t.Fatalf("while %s waits in %s, p's entry to %s: %s %v %v (want BusyElsewhere with %s); p is then paired %d times at once",
		tX, x.ID(), y.ID(), tY, out, err, tX, pairingsOf(t, st, x, y, later))
}

// An entry whose steps between its claim of the player's live-ticket
// record and its script take longer than half the claim grace (a rated
// pool's abort check retried, a slow WAIT, a pause) enters nothing and is
// told so (Unavailable): an entry of the player to another pool, seeing
// the claim older than the grace by its own clock, takes it for an entry
// that failed and enters, and the slow one's ticket would make two. Its
// retry, with the same request id, is answered BusyElsewhere.
func TestAnEntrySlowerThanHalfTheClaimGraceEntersNothing(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	st.SetClaimGraceForTest(2 * time.Second)
	ctx := context.Background()
	now := time.Now()
	x, y := twoPools()
	var tY string
	var outY store.EnterOutcome
	var errY error
	tX, outX, errX := st.Enter(ctx, x, entryOf("p", now), "rX", 2*time.Hour, func() error {
		time.Sleep(1100 * time.Millisecond)
		// Dated past the grace: the clocks of replicas differ.
		tY, outY, errY = st.Enter(ctx, y, entryOf("p", now.Add(2100*time.Millisecond)), "rY", 2*time.Hour, nil)
		return nil
	})
	if errY != nil || outY != store.Entered {
		t.Fatalf("the entry to %s: %s %v %v (the scenario did not happen)", y.ID(), tY, outY, errY)
	}
	if !errors.Is(errX, store.ErrSlowEntry) {
		t.Fatalf("an entry to %s slower than half the claim grace: %s %v %v, want ErrSlowEntry; the entry to %s meanwhile entered %s; p is then paired %d times at once",
			x.ID(), tX, outX, errX, y.ID(), tY, pairingsOf(t, st, x, y, now.Add(2100*time.Millisecond)))
	}
	if id, out, err := st.Enter(ctx, x, entryOf("p", now.Add(2200*time.Millisecond)), "rX", 2*time.Hour, nil); err != nil || out != store.BusyElsewhere || id != tY {
		t.Fatalf("the slow entry's retry: %s %v %v, want BusyElsewhere with %s", id, out, err, tY)
	}
}

// slowRequestRead delays the first read of a request key (Enter's
// requestTicket: a read retried after a timeout, a slow WAIT), which comes
// after the handler dated the entry (t.Entered) and before the claim.
type slowRequestRead struct {
	d    time.Duration
	done atomic.Bool
}

func (s *slowRequestRead) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *slowRequestRead) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "get" && len(cmd.Args()) > 1 {
			if k, _ := cmd.Args()[1].(string); strings.Contains(k, ":r:") && s.done.CompareAndSwap(false, true) {
				time.Sleep(s.d)
			}
		}
		return next(ctx, cmd)
	}
}
func (s *slowRequestRead) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A claim is dated t.Entered, the handler's clock before the request is
// read, and others judge its age by that date: an entry's budget counts
// from it too. An entry whose request read took 1.5 s and whose abort
// check took 0.6 s (each under half the 2 s grace) would write its ticket
// 2.1 s after the date of its claim, while an entry to another pool, at
// real time, took the claim for a dead one and entered: it enters nothing.
func TestAnEntrysBudgetCountsFromTheDateOfItsClaim(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	st.SetClaimGraceForTest(2 * time.Second)
	ctx := context.Background()
	x, y := twoPools()

	slow := redistest.Client(t)
	slow.AddHook(&slowRequestRead{d: 1500 * time.Millisecond})
	sx := store.New(slow, prefix)
	sx.SetClaimGraceForTest(2 * time.Second)

	now := time.Now() // the handler's h.now(), before Enter
	var tY string
	var outY store.EnterOutcome
	var errY error
	tX, outX, errX := sx.Enter(ctx, x, entryOf("p", now), "rX", 2*time.Hour, func() error {
		time.Sleep(600 * time.Millisecond) // the abort check
		tY, outY, errY = st.Enter(ctx, y, entryOf("p", time.Now()), "rY", 2*time.Hour, nil)
		return nil
	})
	t.Logf("entry to %s: %s %v %v; entry to %s: %s %v %v", x.ID(), tX, outX, errX, y.ID(), tY, outY, errY)
	if errX == nil && outX == store.Entered && errY == nil && outY == store.Entered {
		t.Fatalf("p waits in %s (%s) and %s (%s) at once; paired %d times at once",
			x.ID(), tX, y.ID(), tY, pairingsOf(t, st, x, y, time.Now()))
	}
}

// Two devices of p enter pool X (A, B): B claims the live-ticket record
// over A's claim while A checks p's aborts, and is slow to run its script.
// Others judge the record by B's claim, not A's, so A writes nothing and
// is told to retry; an entry to pool Y meanwhile is told to retry too, B
// being on its way; B enters, and Y's retry is answered BusyElsewhere with
// B's ticket. Before, A entered and took the record back: cancelled, A's
// ticket let the entry to Y in, and then B's script entered B as well.
func TestAnEntryWhoseClaimARivalTookWritesNothing(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	now := time.Now()
	x, y := twoPools()

	pause := &pauseBeforeEnter{reached: make(chan struct{}), release: make(chan struct{})}
	slow := redistest.Client(t)
	slow.AddHook(pause)
	var hb *heldEntry
	tA, out, err := st.Enter(ctx, x, entryOf("p", now), "rA", 2*time.Hour, func() error {
		hb = holdEntry(t, pause, func() (string, store.EnterOutcome, error) {
			return store.New(slow, prefix).Enter(ctx, x, entryOf("p", now.Add(10*time.Millisecond)), "rB", 2*time.Hour, nil)
		})
		return nil
	})
	if !errors.Is(err, store.ErrRacedEntries) {
		t.Fatalf("A, whose claim B took: %s %v %v, want ErrRacedEntries", tA, out, err)
	}
	if id, out, err := st.Enter(ctx, y, entryOf("p", now.Add(time.Second)), "rY", 2*time.Hour, nil); !errors.Is(err, store.ErrRacedEntries) {
		t.Fatalf("an entry to %s while B is on its way: %s %v %v, want ErrRacedEntries", y.ID(), id, out, err)
	}
	b := hb.finish()
	if b.err != nil || b.out != store.Entered {
		t.Fatalf("B: %+v", b)
	}
	if id, out, err := st.Enter(ctx, y, entryOf("p", now.Add(2*time.Second)), "rY", 2*time.Hour, nil); err != nil || out != store.BusyElsewhere || id != b.id {
		t.Fatalf("while %s waits in %s, p's entry to %s: %s %v %v, want BusyElsewhere with it; p is then paired %d times at once",
			b.id, x.ID(), y.ID(), id, out, err, pairingsOf(t, st, x, y, now.Add(2*time.Second)))
	}
}

// Two devices of p enter pool X (A, B), each past its last check and on
// its way to its script, B's claim the later. A's script enters A and its
// answer is lost; B's script answers busy with A, and its answer is lost
// too: the record names B's claim, a ticket never written, and A's retry
// is answered from its request. Past the claim grace, p's entry to Y reads
// the pool the record names and finds A: BusyElsewhere, not a second
// ticket.
func TestAClaimOfNothingLeadsToTheTicketWaitingInItsPool(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	now := time.Now()
	x, y := twoPools()

	// Each entry is held before its script, and loses its answer.
	entering := func() (*store.Store, *pauseBeforeEnter) {
		pause := &pauseBeforeEnter{reached: make(chan struct{}), release: make(chan struct{})}
		c := redistest.Client(t)
		c.AddHook(pause)
		c.AddHook(&lostReply{})
		return store.New(c, prefix), pause
	}
	sa, pa := entering()
	sb, pb := entering()
	aErr, bErr := make(chan error, 1), make(chan error, 1)
	go func() {
		_, _, err := sa.Enter(ctx, x, entryOf("p", now), "rA", 2*time.Hour, nil)
		aErr <- err
	}()
	<-pa.reached
	go func() {
		_, _, err := sb.Enter(ctx, x, entryOf("p", now.Add(10*time.Millisecond)), "rB", 2*time.Hour, nil)
		bErr <- err
	}()
	<-pb.reached
	close(pa.release)
	if err := <-aErr; err == nil {
		t.Fatal("A's lost answer was not seen")
	}
	close(pb.release)
	if err := <-bErr; err == nil {
		t.Fatal("B's lost answer was not seen")
	}
	// A's client retries and learns its ticket.
	tA, out, err := st.Enter(ctx, x, entryOf("p", now.Add(time.Second)), "rA", 2*time.Hour, nil)
	if err != nil || out != store.Duplicate {
		t.Fatalf("A's retry: %s %v %v", tA, out, err)
	}
	later := now.Add(11 * time.Second) // past claimGrace
	if tY, outY, errY := st.Enter(ctx, y, entryOf("p", later), "rY", 2*time.Hour, nil); errY != nil || outY != store.BusyElsewhere || tY != tA {
		t.Fatalf("while %s waits in %s, p's entry to %s: %s %v %v, want BusyElsewhere with it; p is then paired %d times at once",
			tA, x.ID(), y.ID(), tY, outY, errY, pairingsOf(t, st, x, y, later))
	}
}

// enterResult is one Enter's answer.
type enterResult struct {
	id  string
	out store.EnterOutcome
	err error
}

// heldEntry is an entry whose client holds it just before its script
// (pauseBeforeEnter) until finish.
type heldEntry struct {
	pause *pauseBeforeEnter
	done  chan enterResult
	early bool // it ended before its script
	res   enterResult
}

// holdEntry runs enter and waits until it reaches its script, or ends
// before it, answered that another entry claimed the record: then it
// wrote nothing.
func holdEntry(t *testing.T, pause *pauseBeforeEnter, enter func() (string, store.EnterOutcome, error)) *heldEntry {
	t.Helper()
	h := &heldEntry{pause: pause, done: make(chan enterResult, 1)}
	go func() {
		id, out, err := enter()
		h.done <- enterResult{id, out, err}
	}()
	select {
	case <-pause.reached:
	case h.res = <-h.done:
		h.early = true
		if !errors.Is(h.res.err, store.ErrRacedEntries) {
			t.Fatalf("the entry ended before its script: %+v", h.res)
		}
	}
	return h
}

// finish lets the entry, if held, run its script, and returns its answer.
func (h *heldEntry) finish() enterResult {
	if !h.early {
		close(h.pause.release)
		h.res = <-h.done
	}
	return h.res
}

// Three actions of one player, no process killed, no clock off: device 1's
// entry E to pool X claims the live-ticket record; device 2's entry C to X
// claims over it and writes its ticket T1; device 2 cancels T1. E's check
// before its script finds the record naming a claim of its own pool (C's)
// and goes on. Device 2 then enters pool Y (F) while E's script is in
// flight (held a few milliseconds, nowhere near the rest of the claim
// grace): the record names T1, found and ended, and pool X's own record of
// p holds nothing yet, so F entered at once, and E's script entered E too.
// E no longer goes on unless the record is its own claim.
func TestARivalsEndedTicketLetsNoEntryIntoASecondPool(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	now := time.Now()
	x, y := twoPools()

	pause := &pauseBeforeEnter{reached: make(chan struct{}), release: make(chan struct{})}
	slow := redistest.Client(t)
	slow.AddHook(pause)
	var tC string
	enterE := func() (string, store.EnterOutcome, error) {
		return store.New(slow, prefix).Enter(ctx, x, entryOf("p", now), "rE", 2*time.Hour, func() error {
			// Device 2, meanwhile: enters X and cancels.
			id, out, err := st.Enter(ctx, x, entryOf("p", now.Add(5*time.Millisecond)), "rC", 2*time.Hour, nil)
			if err != nil || out != store.Entered {
				t.Errorf("C: %s %v %v", id, out, err)
				return nil
			}
			tC = id
			if res, err := st.Cancel(ctx, id, "p"); err != nil || res != store.CancelDone {
				t.Errorf("cancel %s: %v %v", id, res, err)
			}
			return nil
		})
	}
	h := holdEntry(t, pause, enterE)
	held := time.Now()
	tF, outF, errF := st.Enter(ctx, y, entryOf("p", time.Now()), "rF", 2*time.Hour, nil)
	heldFor := time.Since(held)
	e := h.finish()
	t.Logf("C %s (cancelled); E to %s: %+v; F to %s: %s %v %v; E held before its script %v", tC, x.ID(), e, y.ID(), tF, outF, errF, heldFor)
	if e.err == nil && e.out == store.Entered && errF == nil && outF == store.Entered {
		t.Fatalf("p waits in %s (%s) and %s (%s) at once, E held only %v between its last check and its script; paired %d times at once",
			x.ID(), e.id, y.ID(), tF, heldFor, pairingsOf(t, st, x, y, time.Now()))
	}
}

// Two devices enter pool X: E claims the live-ticket record, then G claims
// over it, dated 1.9 s (of a 2 s grace) before E (its replica's clock a
// little behind, its request read a little slow: each within what the
// grace allows), and G's replica is killed right then. E's check before its
// script finds a claim of its own pool and goes on, its own budget barely
// started. But entries to other pools judge the record by G's date: 0.1 s
// after E's claim it is past the grace, pool X holds nothing of p yet, and
// an entry to Y entered while E's script was in flight (E held 0.15 s,
// with more than 1.8 s of the grace left), and E entered too. E, no longer
// holding its claim, writes nothing.
func TestARivalsOlderClaimLetsNoEntryIntoASecondPool(t *testing.T) {
	const grace = 2 * time.Second
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	st.SetClaimGraceForTest(grace)
	ctx := context.Background()
	x, y := twoPools()

	pause := &pauseBeforeEnter{reached: make(chan struct{}), release: make(chan struct{})}
	slow := redistest.Client(t)
	slow.AddHook(pause)
	se := store.New(slow, prefix)
	se.SetClaimGraceForTest(grace)

	dying := redistest.Client(t)
	dying.AddHook(&redistest.KilledAfterWriting{Key: prefix + "mm:{u:p}:live"})
	sg := store.New(dying, prefix)
	sg.SetClaimGraceForTest(grace)

	now := time.Now()
	var errG error
	enterE := func() (string, store.EnterOutcome, error) {
		return se.Enter(ctx, x, entryOf("p", now), "rE", 2*time.Hour, func() error {
			_, _, errG = sg.Enter(ctx, x, entryOf("p", now.Add(-1900*time.Millisecond)), "rG", 2*time.Hour, nil)
			return nil
		})
	}
	h := holdEntry(t, pause, enterE)
	if errG == nil {
		t.Fatal("G was not killed after its claim (the scenario did not happen)")
	}
	time.Sleep(time.Until(now.Add(150 * time.Millisecond)))
	tF, outF, errF := st.Enter(ctx, y, entryOf("p", time.Now()), "rF", 2*time.Hour, nil)
	e := h.finish()
	t.Logf("E to %s: %+v; F to %s: %s %v %v; E's script ran %v after E's claim's date", x.ID(), e, y.ID(), tF, outF, errF, time.Since(now))
	if e.err == nil && e.out == store.Entered && errF == nil && outF == store.Entered {
		t.Fatalf("p waits in %s (%s) and %s (%s) at once, E's script %v after its claim's date (budget %v); paired %d times at once",
			x.ID(), e.id, y.ID(), tF, time.Since(now).Round(time.Millisecond), grace/2, pairingsOf(t, st, x, y, time.Now()))
	}
}

// An entry dated (t.Entered, the handler's clock) more than the claim
// grace before it claims (its request read retried, a slow WAIT) dated
// its claim so, and entries to other pools took it for a dead one at once,
// while its own budget counted from its claim: an entry to Y that claimed
// between E's last check and its script entered, and so did E. Its claim
// is dated when it is made, as its budget is.
func TestAnEntryDatedPastTheGraceIsDatedNow(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	x, y := twoPools()

	pause := &pauseBeforeEnter{reached: make(chan struct{}), release: make(chan struct{})}
	slow := redistest.Client(t)
	slow.AddHook(pause)
	dated := time.Now().Add(-10500 * time.Millisecond) // the handler's h.now(), 10.5 s ago
	enterE := func() (string, store.EnterOutcome, error) {
		return store.New(slow, prefix).Enter(ctx, x, entryOf("p", dated), "rE", 2*time.Hour, nil)
	}
	h := holdEntry(t, pause, enterE)
	held := time.Now()
	tF, outF, errF := st.Enter(ctx, y, entryOf("p", time.Now()), "rF", 2*time.Hour, nil)
	heldFor := time.Since(held)
	e := h.finish()
	t.Logf("E to %s: %+v; F to %s: %s %v %v; E held %v", x.ID(), e, y.ID(), tF, outF, errF, heldFor)
	if e.err == nil && e.out == store.Entered && errF == nil && outF == store.Entered {
		t.Fatalf("p waits in %s (%s) and %s (%s) at once, E held %v before its script; paired %d times at once",
			x.ID(), e.id, y.ID(), tF, heldFor, pairingsOf(t, st, x, y, time.Now()))
	}
}

// Device 1's entry E to pool X is past its last check, on its way to its
// script (held there), when device 2's entry C to X claims the record,
// enters and is cancelled, and device 2 enters pool Y (F): the record named
// C's ended ticket and X held nothing, so F entered. E's script then
// enters E: finding the record naming F's ticket, waiting in Y, E's ticket
// yields before it ever waits (cancelled), and E is answered BusyElsewhere
// with F's ticket; a retry of E's request gets E's ticket, cancelled. p
// waits in one pool.
func TestAnEntryOvertakenOnItsWayYields(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	now := time.Now()
	x, y := twoPools()

	pause := &pauseBeforeEnter{reached: make(chan struct{}), release: make(chan struct{})}
	slow := redistest.Client(t)
	slow.AddHook(pause)
	enterE := func() (string, store.EnterOutcome, error) {
		return store.New(slow, prefix).Enter(ctx, x, entryOf("p", now), "rE", 2*time.Hour, nil)
	}
	h := holdEntry(t, pause, enterE)
	if h.early {
		t.Fatal("E ended before its script (the scenario did not happen)")
	}
	tC, out, err := st.Enter(ctx, x, entryOf("p", now.Add(5*time.Millisecond)), "rC", 2*time.Hour, nil)
	if err != nil || out != store.Entered {
		t.Fatalf("C: %s %v %v", tC, out, err)
	}
	if res, err := st.Cancel(ctx, tC, "p"); err != nil || res != store.CancelDone {
		t.Fatalf("cancel %s: %v %v", tC, res, err)
	}
	tF, out, err := st.Enter(ctx, y, entryOf("p", now.Add(10*time.Millisecond)), "rF", 2*time.Hour, nil)
	if err != nil || out != store.Entered {
		t.Fatalf("F: %s %v %v (the scenario did not happen)", tF, out, err)
	}
	e := h.finish()
	if e.err != nil || e.out != store.BusyElsewhere || e.id != tF {
		t.Fatalf("E, overtaken on its way: %+v, want BusyElsewhere with %s; p is then paired %d times at once", e, tF, pairingsOf(t, st, x, y, now.Add(time.Second)))
	}
	id, out, err := st.Enter(ctx, x, entryOf("p", now.Add(time.Second)), "rE", 2*time.Hour, nil)
	if tk, _ := st.Ticket(ctx, id); err != nil || out != store.Duplicate || tk.State != store.StateCancelled {
		t.Fatalf("E's retry: %s %v %v (%s), want Duplicate with E's ticket, cancelled", id, out, err, tk.State)
	}
	if n := pairingsOf(t, st, x, y, now.Add(time.Second)); n != 1 {
		t.Fatalf("p paired %d times, want once", n)
	}
}
