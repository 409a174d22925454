package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/services/game/internal/store"
)

// claimedFrom has "r" claim proc's lease, run out, with a seat of game g1
// on proc's list.
func claimedFrom(t *testing.T, proc string) (*store.Store, redis.UniversalClient, string) {
	t.Helper()
	ctx := context.Background()
	st, rdb, prefix := newStoreOn(t)
	now := time.Now()
	if _, err := st.Renew(ctx, proc, now.Add(-time.Second), now.Add(-time.Minute), now.Add(-time.Minute), nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Holding(ctx, proc, "g1", rules.First, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Claim(ctx, proc, now, now.Add(time.Minute)); err != nil || got != proc {
		t.Fatalf("claim: %q, %v", got, err)
	}
	return st, rdb, prefix + "{presence}:procs"
}

// listedBy is proc's list, as a release reads it first.
func listedBy(t *testing.T, st *store.Store, proc string) store.Listed {
	t.Helper()
	listed, err := st.Listing(context.Background(), proc)
	if err != nil || len(listed.Seats) == 0 {
		t.Fatalf("listing of %s: %v, %v", proc, listed, err)
	}
	return listed
}

func TestAReleasedProcessIsForgotten(t *testing.T) {
	ctx := context.Background()
	st, rdb, procs := claimedFrom(t, "p")
	if err := st.Released(ctx, "p", listedBy(t, st, "p")); err != nil {
		t.Fatal(err)
	}
	if left, err := rdb.ZRange(ctx, procs, 0, -1).Result(); err != nil || len(left) != 0 {
		t.Errorf("leases after the release: %v, %v; want none", left, err)
	}
	if held, err := st.Held(ctx, "p"); err != nil || len(held) != 0 {
		t.Errorf("games listed after the release: %v, %v; want none", held, err)
	}
}

// TestAProcessBackBeforeItsReleaseEndedKeepsItsLease: a process that
// renewed its lease while another released its seats lost its lease and
// its list when the release ended, although it served on.
func TestAProcessBackBeforeItsReleaseEndedKeepsItsLease(t *testing.T) {
	ctx := context.Background()
	st, rdb, procs := claimedFrom(t, "p")
	now := time.Now()
	if _, err := st.Renew(ctx, "p", now.Add(time.Minute), now, now, nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Released(ctx, "p", listedBy(t, st, "p")); err != nil {
		t.Fatal(err)
	}
	if _, err := rdb.ZScore(ctx, procs, "p").Result(); err != nil {
		t.Errorf("the lease renewed during the release: %v", err)
	}
	if held, err := st.Held(ctx, "p"); err != nil || len(held) != 1 {
		t.Errorf("games listed: %v, %v; want g1", held, err)
	}
	// Its next renewal holds its seats again, those the release let go
	// included, and ends the claim.
	r, err := st.Renew(ctx, "p", now.Add(time.Minute), now, now, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Fresh {
		t.Error("the renewal after the release does not hold the seats again")
	}
	if _, err := rdb.ZScore(ctx, procs, store.ClaimOf("p")).Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("the claim outlived the renewal after the release: %v", err)
	}
}

// afterFirstLook runs fn once, right after the first released.lua call
// (the one that does not end the claim) has been answered.
type afterFirstLook struct {
	procs string
	fired atomic.Bool
	fn    func()
}

func (h *afterFirstLook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *afterFirstLook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		a := cmd.Args()
		// EVALSHA sha 1 <procs> <proc> "": released.lua's first look.
		// Only once it ran: an EVALSHA answered NOSCRIPT is sent again as
		// EVAL.
		if err == nil && (cmd.Name() == "evalsha" || cmd.Name() == "eval") && len(a) == 6 &&
			a[3] == h.procs && a[5] == "" && h.fired.CompareAndSwap(false, true) {
			h.fn()
		}
		return err
	}
}

func (h *afterFirstLook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAProcessBackBetweenTheLooksOfItsReleaseLostItsListing:
// P was cut off for longer than its lease; R claimed the lease and let go
// of P's seats. P came back just as R's release ended, between its first
// look (P not back yet) and the deletion of P's list: P renewed its lease
// and listed the seat whose stream it still served (its rehold) before
// holding it in the game. The deletion dropped that listing, and the
// second look only left the claim run out for P's next renewal to list
// it again. Had P crashed before that renewal (a third of a lease), its
// lease would have run out with a list that named nothing: no reaper
// would let go of the seat P held in the game, shown connected for good.
func TestAProcessBackBetweenTheLooksOfItsReleaseLostItsListing(t *testing.T) {
	ctx := context.Background()
	p, _, prefix := newStoreOn(t) // P's store
	procs := prefix + "{presence}:procs"
	now := time.Now()
	if _, err := p.Renew(ctx, "p", now.Add(-time.Second), now.Add(-time.Minute), now.Add(-time.Minute), nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Holding(ctx, "p", "g1", rules.First, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}

	// R's store, on a client of its own that lets P come back at the
	// chosen moment.
	rc := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { _ = rc.Close() })
	hook := &afterFirstLook{procs: procs, fn: func() {
		// P is back: its renewal finds the claim (Fresh) and it lists
		// its seat again before it holds it in the game.
		back := time.Now()
		r, err := p.Renew(ctx, "p", back.Add(15*time.Second), back, back, nil, 0)
		if err != nil || !r.Fresh {
			t.Errorf("P's renewal: %+v, %v; want Fresh", r, err)
		}
		if err := p.Holding(ctx, "p", "g1", rules.First, time.Now().Add(time.Minute)); err != nil {
			t.Error(err)
		}
	}}
	rc.AddHook(hook)
	r, err := store.New(rc, store.Config{Prefix: prefix, LiveTTL: time.Hour, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Claim(ctx, "p", now, now.Add(time.Minute)); err != nil || got != "p" {
		t.Fatalf("claim: %q, %v", got, err)
	}
	// R has let go of g1's seat in the game; its release ends.
	if err := r.Released(ctx, "p", listedBy(t, r, "p")); err != nil {
		t.Fatal(err)
	}
	if !hook.fired.Load() {
		t.Fatal("the hook never ran: released.lua was not called as expected")
	}

	// P then crashes before its next renewal. Long after, a reaper takes
	// its lease and looks for the seats to let go.
	later := time.Now().Add(time.Hour)
	entries, err := r.Expired(ctx, later, 100)
	if err != nil {
		t.Fatal(err)
	}
	var released []string
	for _, e := range entries {
		proc, err := r.Claim(ctx, e, later, later.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if proc != "p" {
			continue
		}
		ids, err := r.Held(ctx, proc)
		if err != nil {
			t.Fatal(err)
		}
		released = append(released, ids...)
	}
	if !slices.Contains(released, "g1") {
		t.Errorf("P came back and listed the seat of g1 it holds again, between the two looks of R's release; "+
			"R's deletion of P's list dropped it, and once P crashed before its next renewal the reaper of its lease "+
			"had nothing to let go (leases run out: %v; games listed: %v): the seat stays held for good", entries, released)
	}
}

// TestASeatListedDuringAReleaseWasReapedByNobody: P's lease ran out
// while P was paused (not dead). R claims it and reads P's list (g1).
// P wakes and, before its overdue renewal, a stream of g2 opens: P lists
// g2's seat (Holding, then the commit naming it holder). R's release
// ends: P is not back, and the claim was dropped with P's lease. P then
// crashes before renewing: g2 stayed on the list, but nothing named P
// among the leases any more, no round found P, and g2's seat stayed held
// by a dead process for good. The claim is now left run out.
func TestASeatListedDuringAReleaseWasReapedByNobody(t *testing.T) {
	ctx := context.Background()
	st, _, _ := newStoreOn(t)
	now := time.Now()
	if _, err := st.Renew(ctx, "p", now.Add(-time.Second), now.Add(-time.Minute), now.Add(-time.Minute), nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Holding(ctx, "p", "g1", rules.First, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Claim(ctx, "p", now, now.Add(time.Minute)); err != nil || got != "p" {
		t.Fatalf("claim: %q, %v", got, err)
	}
	listed, err := st.Listing(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	// P, awake, lists a seat it opens before its renewal runs.
	if err := st.Holding(ctx, "p", "g2", rules.Second, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := st.Released(ctx, "p", listed); err != nil {
		t.Fatal(err)
	}
	held, err := st.Held(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	// P crashes now. Much later, reapers look for leases run out.
	later := time.Now().Add(24 * time.Hour)
	entries, err := st.Expired(ctx, later, 1000)
	if err != nil {
		t.Fatal(err)
	}
	reaped := slices.Contains(entries, "p") || slices.Contains(entries, "claim:p")
	if slices.Contains(held, "g2") && !reaped {
		t.Errorf("after the release P's list still names %v, yet no lease or claim of P is left (leases run out: %v): "+
			"the seat of g2, listed while the release ran, is released by no reaper once P dies", held, entries)
	}
}

// afterSCard runs fn once, right after the first SCARD has been answered.
type afterSCard struct {
	fired atomic.Bool
	fn    func()
}

func (h *afterSCard) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *afterSCard) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && cmd.Name() == "scard" && h.fired.CompareAndSwap(false, true) {
			h.fn()
		}
		return err
	}
}

func (h *afterSCard) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestASeatListedAfterTheReleaseCountedWasReapedByNobody: the case of
// TestASeatListedDuringAReleaseWasReapedByNobody, with P's Holding landing
// a moment later: after the release's count of the list (found empty).
// The claim was ended, P's list named g2, and once P crashed before
// renewing no lease or claim of P was left for any reaper to find. The
// count now comes after the claim's end, and a Holding that finds no
// lease leaves a claim run out.
func TestASeatListedAfterTheReleaseCountedWasReapedByNobody(t *testing.T) {
	ctx := context.Background()
	p, _, prefix := newStoreOn(t) // P's store
	now := time.Now()
	if _, err := p.Renew(ctx, "p", now.Add(-time.Second), now.Add(-time.Minute), now.Add(-time.Minute), nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Holding(ctx, "p", "g1", rules.First, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { _ = rc.Close() })
	hook := &afterSCard{fn: func() {
		// P, paused past its lease and awake again, opens a stream of g2
		// before its overdue renewal runs.
		if err := p.Holding(ctx, "p", "g2", rules.Second, time.Now().Add(time.Minute)); err != nil {
			t.Error(err)
		}
	}}
	rc.AddHook(hook)
	r, err := store.New(rc, store.Config{Prefix: prefix, LiveTTL: time.Hour, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Claim(ctx, "p", now, now.Add(time.Minute)); err != nil || got != "p" {
		t.Fatalf("claim: %q, %v", got, err)
	}
	listed, err := r.Listing(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Released(ctx, "p", listed); err != nil {
		t.Fatal(err)
	}
	if !hook.fired.Load() {
		t.Fatal("the hook never ran: Released sent no SCARD")
	}
	held, err := r.Held(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	// P crashes now. Much later, reapers look for leases run out.
	entries, err := r.Expired(ctx, time.Now().Add(24*time.Hour), 1000)
	if err != nil {
		t.Fatal(err)
	}
	reaped := slices.Contains(entries, "p") || slices.Contains(entries, store.ClaimOf("p"))
	if slices.Contains(held, "g2") && !reaped {
		t.Errorf("after the release P's list still names %v, yet no lease or claim of P is left (leases run out: %v): "+
			"the seat of g2, listed between the release's count and its end, is released by no reaper once P dies", held, entries)
	}
}

// TestASeatListedAgainDuringAReleaseWasTakenOff: R reads P's list; P
// (paused past its lease, awake before its renewal) closes the seat's
// stream and opens it again, listing the identical seat; R's release
// ends. The release took the seat off, unable to tell it from the one it
// read, and ended the claim: had P died before its next renewal, the seat
// was held for good. The list's count of listings tells them apart: the
// seat stays listed, the claim left run out for a later round.
func TestASeatListedAgainDuringAReleaseWasTakenOff(t *testing.T) {
	ctx := context.Background()
	st, rdb, procs := claimedFrom(t, "p")
	listed, err := st.Listing(ctx, "p")
	if err != nil || len(listed.Seats) != 1 {
		t.Fatalf("listing %v, %v", listed, err)
	}
	if err := st.NotHolding(ctx, "p", "g1", rules.First); err != nil {
		t.Fatal(err)
	}
	if err := st.Holding(ctx, "p", "g1", rules.First, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := st.Released(ctx, "p", listed); err != nil {
		t.Fatal(err)
	}
	left, _ := st.Listing(ctx, "p")
	entries, _ := rdb.ZRange(ctx, procs, 0, -1).Result()
	if len(left.Seats) == 0 || !slices.Contains(entries, store.ClaimOf("p")) {
		t.Errorf("the seat listed again: list %v, leases %v", left, entries)
	}
	// A later round, P dead, reads again and finishes: nothing left.
	listed, _ = st.Listing(ctx, "p")
	if err := st.Released(ctx, "p", listed); err != nil {
		t.Fatal(err)
	}
	keys, _ := rdb.Keys(ctx, procs[:len(procs)-len("{presence}:procs")]+"{presence:p}*").Result()
	entries, _ = rdb.ZRange(ctx, procs, 0, -1).Result()
	if len(keys) != 0 || len(entries) != 0 {
		t.Errorf("left after the last round: keys %v, leases %v", keys, entries)
	}
}

// TestTheCountOfListingsExpires: a process's count of listings is kept
// beside its list, deleted by a release that empties the list and by the
// process's clean stop; a release by a build that knows nothing of it (a
// rolling upgrade, a rollback) deletes neither, and the count would stay
// in Redis for good, process ids never coming back.
func TestTheCountOfListingsExpires(t *testing.T) {
	ctx := context.Background()
	_, rdb, procs := claimedFrom(t, "p")
	key := strings.TrimSuffix(procs, "{presence}:procs") + "{presence:p}:listings"
	ttl, err := rdb.PTTL(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= 0 || ttl > 30*24*time.Hour {
		t.Errorf("%s: TTL %v, want one of at most 30 days", key, ttl)
	}
}
