package store_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// isCancelScript tells cancel.lua's call: four keys, the fourth a
// ticket.
func isCancelScript(cmd redis.Cmder) bool {
	k := scriptKeys(cmd)
	return len(k) == 4 && strings.Contains(k[3], ":t:")
}

// afterEnter acts once the first enter script has run: it may hold
// the caller right after it (hold), and it fails the first command
// matching fail afterwards, having run it when run is set (a lost reply)
// or not (Redis out of reach for a moment).
type afterEnter struct {
	hold    bool
	reached chan struct{}
	release chan struct{}
	fail    func(redis.Cmder) bool
	run     bool

	entered atomic.Bool
	failed  atomic.Bool
}

func (h *afterEnter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *afterEnter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.entered.Load() && h.fail != nil && h.fail(cmd) && h.failed.CompareAndSwap(false, true) {
			if h.run {
				_ = next(ctx, cmd)
			}
			lost := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
			cmd.SetErr(lost)
			return lost
		}
		err := next(ctx, cmd)
		if isEnterScript(cmd) && h.entered.CompareAndSwap(false, true) && h.hold {
			close(h.reached)
			<-h.release
		}
		return err
	}
}
func (h *afterEnter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// overtake runs the documented overtaking (TestAnEntryOvertakenOnItsWayYields):
// E to pool X is held before its script; device 2 enters X (C), cancels
// it, and enters Y (F). It returns E's store, the release of E's script,
// E's result channel and F's ticket.
func overtake(t *testing.T, prefix string, st *store.Store, x, y store.Pool, now time.Time, hooks ...redis.Hook) (chan enterResult, func(), string) {
	t.Helper()
	ctx := context.Background()
	pause := &pauseBeforeEnter{reached: make(chan struct{}), release: make(chan struct{})}
	slow := redistest.Client(t)
	slow.AddHook(pause)
	for _, h := range hooks {
		slow.AddHook(h)
	}
	eDone := make(chan enterResult, 1)
	go func() {
		id, out, err := store.New(slow, prefix).Enter(ctx, x, entryOf("p", now), "rE", 2*time.Hour, nil)
		eDone <- enterResult{id, out, err}
	}()
	select {
	case <-pause.reached:
	case r := <-eDone:
		t.Fatalf("E ended before its script: %+v", r)
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
	return eDone, func() { close(pause.release) }, tF
}

// An overtaken entry yielded only if its own process lived on after its
// script and reached Redis: here the read of the live-ticket record after
// its script fails once (a reset connection), and Enter answered Entered,
// the player waiting in X and in Y at once. A ticket is written entering,
// and waits for pairing only once its entry has made sure of the record:
// this one never waits.
func TestAnOvertakenEntryWhoseSettleFailsNeverWaits(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	now := time.Now()
	x, y := twoPools()
	liveKey := prefix + "mm:{u:p}:live"
	after := &afterEnter{fail: func(c redis.Cmder) bool {
		return c.Name() == "get" && len(c.Args()) > 1 && c.Args()[1] == liveKey
	}}
	eDone, release, tF := overtake(t, prefix, st, x, y, now, after)
	release()
	e := <-eDone
	t.Logf("E: %+v", e)
	if !after.failed.Load() {
		t.Fatal("settle's read was not failed (the scenario did not happen)")
	}
	if e.err == nil {
		notWaitingInBoth(t, st, x, y, e.id, tF, now)
	}
}

// The same with the process killed right after its script (every later
// command fails): its ticket, entering, never waits.
func TestAnOvertakenEntryKilledAfterItsScriptNeverWaits(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	now := time.Now()
	x, y := twoPools()
	killed := &redistest.KilledAfterWriting{Key: prefix + "mm:{p:" + x.Tag() + "}:q"}
	eDone, release, tF := overtake(t, prefix, st, x, y, now, killed)
	release()
	e := <-eDone
	t.Logf("E (killed after its script): %+v", e)
	ctx := context.Background()
	id, err := rdb.HGet(ctx, prefix+"mm:{p:"+x.Tag()+"}:pl", "p").Result()
	if err != nil {
		t.Fatalf("no ticket of p in %s: %v (the scenario did not happen)", x.ID(), err)
	}
	notWaitingInBoth(t, st, x, y, id, tF, now)
}

// A retry of E (same request_id, the client timed out on replica A and
// resent to B) that reads E's request after E's script and before E
// yields makes sure of the record itself: E's ticket yields, and the retry
// is answered with it, cancelled. E is answered BusyElsewhere with F's
// ticket, and a later retry of the request gets E's ticket, cancelled,
// again: its request is remembered (it was deleted, and a retry was
// answered otherwise than the first success).
func TestARetryAnsweredBeforeTheYieldIsAnsweredTheSameAfter(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	now := time.Now()
	x, y := twoPools()
	after := &afterEnter{hold: true, reached: make(chan struct{}), release: make(chan struct{})}
	eDone, release, tF := overtake(t, prefix, st, x, y, now, after)
	release()
	select {
	case <-after.reached:
	case r := <-eDone:
		t.Fatalf("E ended before its script ran: %+v", r)
	}
	// The retry on replica B.
	r2, out2, err := st.Enter(ctx, x, entryOf("p", now.Add(20*time.Millisecond)), "rE", 2*time.Hour, nil)
	if err != nil || out2 != store.Duplicate {
		t.Fatalf("retry during E's settle: %s %v %v, want Duplicate (the scenario did not happen)", r2, out2, err)
	}
	tk, err := st.Ticket(ctx, r2)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("retry answered Duplicate %s, state %s (the handler tells the client this ticket)", r2, tk.State)
	close(after.release)
	e := <-eDone
	t.Logf("E: %+v", e)
	if e.err != nil || e.out != store.BusyElsewhere || e.id != tF {
		t.Fatalf("E: %+v, want BusyElsewhere with %s", e, tF)
	}
	tk2, _ := st.Ticket(ctx, r2)
	r3, out3, err := st.Enter(ctx, x, entryOf("p", now.Add(time.Second)), "rE", 2*time.Hour, nil)
	if err != nil || out3 != store.Duplicate || r3 != r2 {
		t.Fatalf("the client was answered %s (Duplicate, state %s, now %s) for request rE; its next retry of rE: %s %v %v (F is %s): a retry answered otherwise than the first success",
			r2, tk.State, tk2.State, r3, out3, err, tF)
	}
}

// A yield whose cancel's answer is lost (it ran: the ticket is cancelled)
// made Enter answer Entered with that ticket: the handler told the client
// it waits, while it was cancelled. It is an error now, and the ticket
// never waited.
func TestAYieldWhoseCancelAnswerIsLostIsNotAnsweredEntered(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	now := time.Now()
	x, y := twoPools()
	after := &afterEnter{fail: isCancelScript, run: true}
	eDone, release, tF := overtake(t, prefix, st, x, y, now, after)
	release()
	e := <-eDone
	t.Logf("E: %+v; F %s", e, tF)
	if !after.failed.Load() {
		t.Fatal("settle's cancel was not failed (the scenario did not happen)")
	}
	if e.err == nil && e.out == store.Entered {
		tk, _ := st.Ticket(ctx, e.id)
		if tk.State != store.StateWaiting {
			t.Fatalf("E answered Entered %s (the client is told it waits), but the ticket is %s", e.id, tk.State)
		}
	}
}

// The same when the enter script's answer is lost (a reset connection, or a
// WAIT for replicas that failed after the script ran): the client's retry
// with the same request_id, answered from the request, makes sure of the
// record for the ticket, entering, which yields.
func TestAnOvertakenEntryWhoseAnswerIsLostYieldsOnItsRetry(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	now := time.Now()
	x, y := twoPools()
	eDone, release, tF := overtake(t, prefix, st, x, y, now, &lostReply{})
	release()
	e := <-eDone
	if e.err == nil {
		t.Fatalf("E's lost reply was not seen: %+v", e)
	}
	id, out, err := st.Enter(ctx, x, entryOf("p", now.Add(time.Second)), "rE", 2*time.Hour, nil)
	if err != nil || out != store.Duplicate {
		t.Fatalf("the client's retry: %s %v %v", id, out, err)
	}
	notWaitingInBoth(t, st, x, y, id, tF, now)
}

// An entry killed right after enter.lua, with no retry (the client gave
// up, or restarted and entered with a new request_id), left its ticket
// entering for good, shown as waiting, so a watcher was never told it
// ended, even past its expiry. It can never wait once half the claim
// grace has passed (activate.lua), and once twice the grace has, it reads
// as expired.
func TestAnEnteringTicketWhoseEntryDiedEnds(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	const grace = 400 * time.Millisecond
	st.SetClaimGraceForTest(grace)
	ctx := context.Background()
	now := time.Now()
	_, y := twoPools()
	killedRdb := redistest.Client(t)
	killedRdb.AddHook(&redistest.KilledAfterWriting{Key: prefix + "mm:{p:" + y.Tag() + "}:q"})
	if _, _, err := store.New(killedRdb, prefix).Enter(ctx, y, entryOf("p", now), "r1", 2*time.Hour, nil); err == nil {
		t.Fatal("the entry was not killed (the scenario did not happen)")
	}
	id, err := rdb.HGet(ctx, prefix+"mm:{p:"+y.Tag()+"}:pl", "p").Result()
	if err != nil {
		t.Fatalf("no ticket written (the scenario did not happen): %v", err)
	}
	if tk, err := st.Ticket(ctx, id); err != nil || tk.State != store.StateEntering {
		t.Fatalf("ticket %s just after its entry died: %+v %v, want entering", id, tk, err)
	}
	time.Sleep(2*grace + 50*time.Millisecond)
	if tk, err := st.Ticket(ctx, id); err != nil || tk.State != store.StateExpired {
		t.Fatalf("ticket %s twice the grace after its entry died: %q %v, want expired (a watcher is told it ended)", id, tk.State, err)
	}
	// And the player enters that pool again.
	if id2, out, err := st.Enter(ctx, y, entryOf("p", time.Now()), "r2", 2*time.Hour, nil); err != nil || out != store.Entered {
		t.Fatalf("entering again: %s %v %v", id2, out, err)
	}
}

// Entries killed between enter.lua and activate.lua, whose players never
// came back, left their fields in the pool's players hash for ever: only
// the same player's next entry overwrote one. A pass sweeps the fields
// whose tickets are gone, and a pool nobody enters lets the hash expire.
func TestKilledEntriesLeaveNothingInTheirPoolForEver(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	_, y := twoPools()
	plKey := prefix + "mm:{p:" + y.Tag() + "}:pl"
	const keep = time.Second
	// Loads enter.lua into Redis' script cache: a killed client's EVALSHA
	// must run it, not fall back to EVAL.
	warm, _, err := st.Enter(ctx, y, entryOf("warm", time.Now()), "w", keep, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Cancel(ctx, warm, "warm"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		deadEnteringKept(t, st, prefix, y, fmt.Sprintf("gone%d", i), keep)
		if ttl := rdb.PTTL(ctx, plKey).Val(); ttl <= 0 || ttl > keep {
			t.Fatalf("the players hash lives %v after an entry kept %v, want as long", ttl, keep)
		}
	}
	// A player entering for an hour keeps the pool busy long past the
	// killed tickets' records.
	id, _, err := st.Enter(ctx, y, entryOf("here", time.Now()), "h", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(keep + 500*time.Millisecond)
	for _, r := range st.Pair(ctx, []store.Pool{y}, store.PairParams{Now: time.Now(), BaseWindow: 200, MaxPairs: 100, Keep: time.Hour}) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if left := rdb.HGetAll(ctx, plKey).Val(); len(left) != 1 || left["here"] != id {
		t.Fatalf("after a pass, the players hash holds %v, want only here: %s", left, id)
	}
	if ttl := rdb.TTL(ctx, plKey).Val(); ttl <= time.Hour-time.Minute {
		t.Fatalf("the players hash lives %v once an entry is kept an hour", ttl)
	}
}

// An entry whose activation comes late (held after its script longer than
// half the claim grace: a WAIT for replicas, a GC pause) gets ErrSlowEntry,
// which the handler answers Unavailable "nothing was entered: retry with
// the same request_id". enter.lua had written the request, so the retry was
// answered with the expired ticket and never entered: the late activation
// forgets the request, and the retry enters.
func TestALateActivationsRetryEntersAfresh(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	ctx := context.Background()
	_, y := twoPools()
	const grace = 600 * time.Millisecond
	after := &afterEnter{hold: true, reached: make(chan struct{}), release: make(chan struct{})}
	slow := redistest.Client(t)
	slow.AddHook(after)
	sst := store.New(slow, prefix)
	sst.SetClaimGraceForTest(grace)
	st.SetClaimGraceForTest(grace)
	done := make(chan enterResult, 1)
	go func() {
		id, out, err := sst.Enter(ctx, y, entryOf("p", time.Now()), "r1", 2*time.Hour, nil)
		done <- enterResult{id, out, err}
	}()
	select {
	case <-after.reached:
	case r := <-done:
		t.Fatalf("ended before its script: %+v", r)
	}
	time.Sleep(grace/2 + 100*time.Millisecond)
	close(after.release)
	e := <-done
	if !errors.Is(e.err, store.ErrSlowEntry) {
		t.Fatalf("first attempt: %+v, want ErrSlowEntry (the scenario did not happen)", e)
	}
	t.Logf("first attempt: %v (handler: Unavailable, nothing was entered: retry with the same request_id)", e.err)
	id, out, err := st.Enter(ctx, y, entryOf("p", time.Now()), "r1", 2*time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := st.Ticket(ctx, id)
	if out != store.Entered || tk.State != store.StateWaiting {
		t.Fatalf("the retry with the same request_id: %s %v, ticket %q: told nothing was entered and to retry with the same request_id, the client gets an ended ticket and never enters", id, out, tk.State)
	}
}

// deadEntering leaves player p a ticket in pool y whose entry was killed
// right after enter.lua (entering for good), and returns its id.
func deadEntering(t *testing.T, st *store.Store, prefix string, y store.Pool, p string) string {
	t.Helper()
	return deadEnteringKept(t, st, prefix, y, p, 2*time.Hour)
}

// deadEnteringKept is deadEntering of a ticket kept keep.
func deadEnteringKept(t *testing.T, st *store.Store, prefix string, y store.Pool, p string, keep time.Duration) string {
	t.Helper()
	ctx := context.Background()
	killedRdb := redistest.Client(t)
	killedRdb.AddHook(&redistest.KilledAfterWriting{Key: prefix + "mm:{p:" + y.Tag() + "}:q"})
	killed := store.New(killedRdb, prefix)
	if _, _, err := killed.Enter(ctx, y, entryOf(p, time.Now()), "r1", keep, nil); err == nil {
		t.Fatal("the entry was not killed (the scenario did not happen)")
	}
	id, err := st.Ticket(ctx, mustPl(t, prefix, y, p))
	if err != nil || id.State != store.StateEntering {
		t.Fatalf("dead entry's ticket: %+v %v, want entering", id, err)
	}
	return id.ID
}

// mustPl is the ticket pool y lists for player p.
func mustPl(t *testing.T, prefix string, y store.Pool, p string) string {
	t.Helper()
	rdb := redistest.Client(t)
	id, err := rdb.HGet(context.Background(), prefix+"mm:{p:"+y.Tag()+"}:pl", p).Result()
	if err != nil {
		t.Fatalf("no ticket written (the scenario did not happen): %v", err)
	}
	return id
}

// Once Ticket() shows a dead entry's ticket expired (what GetTicket and
// WatchTicket tell the client), the player's next entry to that pool must
// not be refused as Busy naming that very ticket ("you already have ticket
// X in this pool, waiting or paired"). An entry dated a little earlier
// than the reader's clock (a replica whose clock is 200 ms behind, well
// within the tolerated half grace, or a handler whose `now` was taken
// before a slow rating read) was: the reads judged it by another clock. It
// reads expired after twice the grace, long after it holds nothing.
func TestAnExpiredLookingEnteringTicketLetsThePlayerBackIn(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	const grace = 1 * time.Second
	st.SetClaimGraceForTest(grace)
	ctx := context.Background()
	_, y := twoPools()
	id := deadEntering(t, st, prefix, y, "p")
	time.Sleep(2*grace + 50*time.Millisecond)
	tk, err := st.Ticket(ctx, id)
	if err != nil || tk.State != store.StateExpired {
		t.Fatalf("ticket %s twice the grace after its entry died: %q %v, want expired", id, tk.State, err)
	}
	// The entry of another replica, 200 ms behind the reader's clock.
	id2, out, err := st.Enter(ctx, y, entryOf("p", time.Now().Add(-200*time.Millisecond)), "r2", 2*time.Hour, nil)
	tk, _ = st.Ticket(ctx, id)
	if err != nil || out != store.Entered {
		t.Fatalf("entering again after ticket %s reads %q: got id=%s outcome=%v err=%v; want a new ticket (Busy -> AlreadyExists naming a ticket GetTicket shows EXPIRED)", id, tk.State, id2, out, err)
	}
}

// The same across pools: a ticket shown expired kept the player out of
// another pool (BusyElsewhere naming it).
func TestAnExpiredLookingEnteringTicketLetsThePlayerIntoAnotherPool(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	const grace = 1 * time.Second
	st.SetClaimGraceForTest(grace)
	ctx := context.Background()
	x, y := twoPools()
	id := deadEntering(t, st, prefix, y, "p")
	time.Sleep(2*grace + 50*time.Millisecond)
	tk, err := st.Ticket(ctx, id)
	if err != nil || tk.State != store.StateExpired {
		t.Fatalf("ticket %s twice the grace after its entry died: %q %v, want expired", id, tk.State, err)
	}
	id2, out, err := st.Enter(ctx, x, entryOf("p", time.Now().Add(-200*time.Millisecond)), "rx", 2*time.Hour, nil)
	if err != nil || out != store.Entered {
		t.Fatalf("entering another pool after ticket %s reads expired: got id=%s outcome=%v err=%v; want a new ticket", id, id2, out, err)
	}
}

// A ticket GetTicket/WatchTicket showed EXPIRED (a watcher was told it
// ended, and stopped) was turned CANCELLED by CancelTicket: its ended
// state changed after it was reported final. It stays expired.
func TestACancelLeavesAnExpiredLookingTicketExpired(t *testing.T) {
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st := store.New(rdb, prefix)
	const grace = 500 * time.Millisecond
	st.SetClaimGraceForTest(grace)
	ctx := context.Background()
	_, y := twoPools()
	id := deadEntering(t, st, prefix, y, "p")
	time.Sleep(2*grace + 50*time.Millisecond)
	before, _ := st.Ticket(ctx, id)
	out, err := st.Cancel(ctx, id, "p")
	after, _ := st.Ticket(ctx, id)
	if before.State != after.State {
		t.Fatalf("ticket %s read %q, Cancel -> %q %v, then reads %q: an ended state reported final changed", id, before.State, out, err, after.State)
	}
}

// notWaitingInBoth fails if tickets idX, of pool x, and idY, of pool y,
// both wait: the player would be paired twice.
func notWaitingInBoth(t *testing.T, st *store.Store, x, y store.Pool, idX, idY string, now time.Time) {
	t.Helper()
	ctx := context.Background()
	tX, _ := st.Ticket(ctx, idX)
	tY, _ := st.Ticket(ctx, idY)
	if tX.State == store.StateWaiting && tY.State == store.StateWaiting {
		t.Fatalf("%s waits in %s and %s waits in %s: p is paired %d times at once",
			idX, x.ID(), idY, y.ID(), pairingsOf(t, st, x, y, now.Add(time.Second)))
	}
}
