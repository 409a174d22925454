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

// isEnterScript tells the enter script's call (enter.lua: five keys, the
// fourth a ticket, the fifth a request).
func isEnterScript(cmd redis.Cmder) bool {
	a := cmd.Args()
	if len(a) < 8 || (cmd.Name() != "evalsha" && cmd.Name() != "eval") {
		return false
	}
	n, ok := a[2].(int)
	if !ok {
		if n64, ok64 := a[2].(int64); ok64 {
			n = int(n64)
		} else {
			return false
		}
	}
	if n != 5 {
		return false
	}
	k4, _ := a[6].(string)
	k5, _ := a[7].(string)
	return strings.Contains(k4, ":t:") && strings.Contains(k5, ":r:")
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

// Two entries of p to pool X (two devices, other request ids) race: B
// replaces A's claim of the live-ticket record while A's ticket is not yet
// written; A writes its ticket; A's ticket is cancelled before B's script
// runs, which then enters B's ticket. Had A taken the record back, it
// would name A's ticket, ended, and nothing B's: the record names B's
// claim, so p's entry to pool Y is answered BusyElsewhere with B's ticket.
func TestAnEntryWrittenAfterItsRivalsTicketEndedKeepsThePlayerInOnePool(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	now := time.Now()
	x, y := twoPools()

	pause := &pauseBeforeEnter{reached: make(chan struct{}), release: make(chan struct{})}
	slow := redistest.Client(t)
	slow.AddHook(pause)
	type result struct {
		id  string
		out store.EnterOutcome
		err error
	}
	bDone := make(chan result, 1)
	tA, out, err := st.Enter(ctx, x, entryOf("p", now), "rA", 2*time.Hour, func() error {
		// A checks p's aborts; meanwhile B claims the record and is slow
		// to run its script.
		go func() {
			id, out, err := store.New(slow, prefix).Enter(ctx, x, entryOf("p", now.Add(10*time.Millisecond)), "rB", 2*time.Hour, nil)
			bDone <- result{id, out, err}
		}()
		select {
		case <-pause.reached:
		case r := <-bDone:
			t.Errorf("B ended before its script: %+v", r)
		}
		return nil
	})
	if err != nil || out != store.Entered {
		t.Fatalf("A: %s %v %v", tA, out, err)
	}
	if res, err := st.Cancel(ctx, tA, "p"); err != nil || res != store.CancelDone {
		t.Fatalf("cancel %s: %v %v", tA, res, err)
	}
	close(pause.release)
	b := <-bDone
	if b.err != nil || b.out != store.Entered {
		t.Fatalf("B: %+v (the scenario did not happen)", b)
	}

	tY, out, err := st.Enter(ctx, y, entryOf("p", now.Add(time.Second)), "rY", 2*time.Hour, nil)
	if err == nil && out == store.BusyElsewhere && tY == b.id {
		return
	}
	t.Fatalf("while %s waits in %s, p's entry to %s: %s %v %v (want BusyElsewhere with %s); p is then paired %d times at once",
		b.id, x.ID(), y.ID(), tY, out, err, b.id, pairingsOf(t, st, x, y, now.Add(time.Second)))
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

// Two devices of p enter pool X (A, B); B claims the live-ticket record
// over A's claim and is slow to run its script. A writes its ticket and
// took the record back from B's claim, its ticket not written; p cancels A
// and enters pool Y (C): the record named A, cancelled, so C entered, and
// then B's script entered B too. A leaves the record naming B's claim,
// which C, within the claim grace, is told to retry after.
func TestAClaimOfAnotherEntryInFlightIsNeverTakenBack(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	now := time.Now()
	x, y := twoPools()

	pause := &pauseBeforeEnter{reached: make(chan struct{}), release: make(chan struct{})}
	slow := redistest.Client(t)
	slow.AddHook(pause)
	type result struct {
		id  string
		out store.EnterOutcome
		err error
	}
	bDone := make(chan result, 1)
	tA, out, err := st.Enter(ctx, x, entryOf("p", now), "rA", 2*time.Hour, func() error {
		go func() {
			id, out, err := store.New(slow, prefix).Enter(ctx, x, entryOf("p", now.Add(10*time.Millisecond)), "rB", 2*time.Hour, nil)
			bDone <- result{id, out, err}
		}()
		select {
		case <-pause.reached:
		case r := <-bDone:
			t.Errorf("B ended before its script: %+v", r)
		}
		return nil
	})
	if err != nil || out != store.Entered {
		t.Fatalf("A: %s %v %v", tA, out, err)
	}
	if res, err := st.Cancel(ctx, tA, "p"); err != nil || res != store.CancelDone {
		t.Fatalf("cancel %s: %v %v", tA, res, err)
	}
	tC, outC, errC := st.Enter(ctx, y, entryOf("p", now.Add(time.Second)), "rC", 2*time.Hour, nil)
	close(pause.release)
	b := <-bDone
	t.Logf("B to %s: %+v; C to %s: %s %v %v", x.ID(), b, y.ID(), tC, outC, errC)
	if b.err == nil && b.out == store.Entered && errC == nil && outC == store.Entered {
		t.Fatalf("p waits in %s (%s) and %s (%s) at once; paired %d times at once",
			x.ID(), b.id, y.ID(), tC, pairingsOf(t, st, x, y, now.Add(time.Second)))
	}
}

// Two devices of p enter pool X (A, B); B claims over A's claim and is
// slow. A's script enters A and its answer is lost: the record names B's
// claim. B's script answers busy with A, and its answer is lost too, so
// the record names a ticket never written, and A's retry is answered from
// its request. Past the claim grace, p's entry to Y finds A by reading the
// pool the record names: BusyElsewhere, not a second ticket.
func TestAClaimOfNothingLeadsToTheTicketWaitingInItsPool(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	now := time.Now()
	x, y := twoPools()

	lossyA := redistest.Client(t)
	lossyA.AddHook(&lostReply{})
	pause := &pauseBeforeEnter{reached: make(chan struct{}), release: make(chan struct{})}
	lossyB := redistest.Client(t)
	lossyB.AddHook(pause)
	lossyB.AddHook(&lostReply{})
	bErr := make(chan error, 1)
	_, _, errA := store.New(lossyA, prefix).Enter(ctx, x, entryOf("p", now), "rA", 2*time.Hour, func() error {
		go func() {
			_, _, err := store.New(lossyB, prefix).Enter(ctx, x, entryOf("p", now.Add(10*time.Millisecond)), "rB", 2*time.Hour, nil)
			bErr <- err
		}()
		<-pause.reached
		return nil
	})
	if errA == nil {
		t.Fatal("A's lost answer was not seen")
	}
	close(pause.release)
	if err := <-bErr; err == nil {
		t.Fatal("B's lost answer was not seen")
	}
	// A's client retries and learns its ticket.
	tA, out, err := st.Enter(ctx, x, entryOf("p", now.Add(time.Second)), "rA", 2*time.Hour, nil)
	if err != nil || out != store.Duplicate {
		t.Fatalf("A's retry: %s %v %v", tA, out, err)
	}
	later := now.Add(11 * time.Second) // past claimGrace
	tY, outY, errY := st.Enter(ctx, y, entryOf("p", later), "rY", 2*time.Hour, nil)
	if errY == nil && outY == store.Entered {
		t.Fatalf("while %s waits in %s, p's entry to %s ENTERED %s (the live-ticket record named a claim of nothing); paired %d times at once",
			tA, x.ID(), y.ID(), tY, pairingsOf(t, st, x, y, later))
	}
}
