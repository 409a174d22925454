package handler

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/services/game/internal/model"
	"github.com/palacehq/palace/services/game/internal/store"
)

// releasedLook reports whether args are those of a released.lua call:
// EVALSHA sha 1 <procs> <proc> <"", "end" or "runout">.
func releasedLook(a []any, procs string) bool {
	if len(a) != 6 || a[3] != procs {
		return false
	}
	then, ok := a[5].(string)
	return ok && (then == "" || then == "end" || then == "runout")
}

// cutAtReleased cuts its client off Redis (every command fails) from the
// first released.lua call on: the process dies, or loses Redis, as its
// release ends.
type cutAtReleased struct {
	procs string
	cut   atomic.Bool
}

func (h *cutAtReleased) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *cutAtReleased) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && releasedLook(a, h.procs) {
			h.cut.Store(true)
		}
		if h.cut.Load() {
			err := errors.New("connection reset (test)")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (h *cutAtReleased) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.cut.Load() {
			err := errors.New("connection reset (test)")
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// TestASlowReleaseLetGoOfASeatItsProcessHeldAgain: R claims the run out
// lease of P (paused) and releases P's seats, slowly (many games, a slow
// Redis): its claim, a lease long, ran out before R reached P's game. P
// came back meanwhile: its renewal found the claim run out, held its
// seats again and ended the claim. R then let go of P's seat, which P
// held again with the stream open, and died (or lost Redis) as its
// release ended: neither released.lua nor Unclaim landed. Nothing was
// left to tell P to hold its seats again: the player showed disconnected
// for good while its stream was open on a live process renewing its
// lease. A release keeps its claim as it goes.
func TestASlowReleaseLetGoOfASeatItsProcessHeldAgain(t *testing.T) {
	ctx := t.Context()
	var hook *cutAtReleased
	p, r, rdb, prefix, ring := withHookedReleaser(t, func(procs string) redis.Hook {
		hook = &cutAtReleased{procs: procs}
		return hook
	})
	t.Cleanup(func() { hook.cut.Store(false) }) // before r's Close
	// Another live process, whose lease rounds reap too.
	q := newRedisHandlerWith(t, rdb, prefix, ring, func(c *Config) { c.PresenceLease = time.Hour })
	afterFirstRehold(q)

	id, _, _ := newXiangqi(t, p)
	p.presence.opened(ctx, id, rules.First)
	if !holdsFirst(t, p, id) {
		t.Fatal("the seat is not held")
	}

	// R claims P's lease; its release is slow, and its claim runs out
	// before it reaches P's game.
	claimedBy(t, r, p, time.Hour)
	procs := prefix + "{presence}:procs"
	if err := rdb.ZAddXX(ctx, procs, redis.Z{Score: 1, Member: store.ClaimOf(p.proc)}).Err(); err != nil {
		t.Fatal(err)
	}
	// P is back: its renewal finds the claim run out, holds its seats
	// again, and ends the claim.
	backAgain(t, p)
	// R reaches P's game now, lets go of the seat, and dies as it ends
	// (as reap would, it tries to unclaim: cut off, that fails too).
	if err := r.releaseAll(ctx, p.proc); err == nil {
		t.Fatal("R's release went through")
	}
	if err := r.store.Unclaim(context.WithoutCancel(ctx), p.proc); err == nil {
		t.Fatal("R's unclaim went through")
	}

	// P and Q go on with their lease rounds.
	for range 3 {
		backAgain(t, p)
		var wg sync.WaitGroup
		q.reap(ctx, &wg)
		wg.Wait()
	}
	if !holdsFirst(t, p, id) {
		t.Error("P lives, renews its lease and has the seat's stream open, yet the game has the seat let go for good: " +
			"R, whose claim had run out, released it after P held it again, and nothing tells P to hold it again")
	}
}

// beforeReleasedLooks runs fn once, right before the first released.lua
// call: the release has let go of the games it read, and has not yet
// taken their seats off the list.
type beforeReleasedLooks struct {
	procs string
	fired atomic.Bool
	fn    func()
}

func (h *beforeReleasedLooks) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *beforeReleasedLooks) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && releasedLook(a, h.procs) && h.fired.CompareAndSwap(false, true) {
			h.fn()
		}
		return next(ctx, cmd)
	}
}

func (h *beforeReleasedLooks) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAnOpeningCommittedDuringAReleaseWasListedNowhere: P lists a seat
// whose stream opens (Holding) and is paused, or cut off from Redis,
// before its commit lands, for longer than its lease. R claims the lease,
// reads P's list (the seat on it), and lets go of the seat's game:
// nothing to let go, the seat not yet held. P's commit then lands: the
// game has the seat held by P. R's release ended by taking the seat it
// read off P's list and, the list empty, dropping the claim: had P died
// before its next renewal, the seat was held in the game and listed
// nowhere, no lease left to reap, the player shown connected for good.
// The opening lists the seat again after its commit, which a release
// reading the list before finds.
func TestAnOpeningCommittedDuringAReleaseWasListedNowhere(t *testing.T) {
	ctx := t.Context()
	var hook *beforeReleasedLooks
	p, r, _, _, _ := withHookedReleaser(t, func(procs string) redis.Hook {
		hook = &beforeReleasedLooks{procs: procs}
		return hook
	})

	id, _, _ := newXiangqi(t, p)
	k := seatKey{id, rules.First}
	// A stream of the seat opens on P: presence counts it, and record
	// lists the seat (its first step)...
	p.presence.mu.Lock()
	p.presence.seats[k] = &seatStreams{open: 1}
	p.presence.mu.Unlock()
	if err := p.store.Holding(ctx, p.proc, id, rules.First, p.now().Add(p.cfg.PresenceLease)); err != nil {
		t.Fatal(err)
	}
	// ...and P is paused past its lease before the commit lands.
	claimedBy(t, r, p, time.Minute)
	// P's commit lands once R has let go of the game, before R takes the
	// seat off P's list: record, whose Holding again changes nothing.
	hook.fn = func() { p.record(ctx, id, rules.First, 1, false) }
	if err := r.releaseAll(ctx, p.proc); err != nil {
		t.Fatal(err)
	}
	if !hook.fired.Load() {
		t.Fatal("the hook did not fire")
	}
	if !holdsFirst(t, p, id) {
		t.Fatal("the seat is not held in the game")
	}
	// P dies before its next renewal. Long after, every reaper looks.
	listed, err := p.store.Listing(ctx, p.proc)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := r.store.Expired(ctx, r.now().Add(24*time.Hour), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed.Seats) == 0 && !slices.Contains(entries, p.proc) && !slices.Contains(entries, store.ClaimOf(p.proc)) {
		t.Errorf("the game has the seat held by P, yet P lists nothing (%v) and no lease of P is left to reap (leases a day later: %v): "+
			"P dying now leaves the seat connected for good", listed, entries)
	}
}

// holdNthListing holds back the nth SADD of member until released.
type holdNthListing struct {
	member  string
	nth     int32
	n       atomic.Int32
	reached chan struct{}
	release chan struct{}
}

func (f *holdNthListing) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *holdNthListing) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "sadd") && slices.ContainsFunc(cmd.Args(), func(a any) bool { s, _ := a.(string); return s == f.member }) {
			if f.n.Add(1) == f.nth {
				close(f.reached)
				<-f.release
			}
		}
		return next(ctx, cmd)
	}
}

func (f *holdNthListing) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// releasedHere has a release of h's seats let go of game id's: h's lease
// ran out while it was paused.
func releasedHere(t *testing.T, h *Handler, id string) {
	t.Helper()
	if _, err := h.exec(t.Context(), "presence", command{id: id, run: func(st *model.State, _ time.Time) (model.Change, error) {
		ch, ok := model.Release(st, h.proc)
		if !ok {
			return model.Change{}, errNothingToRecord
		}
		return ch, nil
	}}); err != nil {
		t.Fatal(err)
	}
}

// TestAListingAfterItsCommitLandedAfterTheSeatsClosing: an opening lists
// its seat a second time after its commit, and that listing was not
// checked once it landed, as every other listing is (unlistUnlessHeld,
// the overtaken branch of record). A rehold (the lease
// round after a fresh renewal, while a release of this process's seats
// goes on: the release let go of the seat) commits the seat held again
// and sends its second listing; meanwhile the seat's stream closes (its
// closing recorded: LetGo committed, the seat unlisted) or delivers the
// game's end (presence.ended, then unlist, stream.go). The late SADD
// landed after the unlisting: the seat stayed on this process's list,
// held by nobody, for as long as the process lived (and its stop left its
// lease to be reaped instead of forgetting it).
func TestAListingAfterItsCommitLandedAfterTheSeatsClosing(t *testing.T) {
	for _, c := range []struct {
		name  string
		after func(ctx context.Context, h *Handler, id string, black context.Context)
	}{
		{"closed", func(ctx context.Context, h *Handler, id string, _ context.Context) {
			// --presence-grace 0: the closing is recorded at once.
			h.presence.closed(context.WithoutCancel(ctx), id, rules.First)
		}},
		{"ended", func(ctx context.Context, h *Handler, id string, black context.Context) {
			if _, err := h.Resign(black, &gamev1.ResignRequest{GameId: id, RequestId: "resign"}); err != nil {
				t.Fatal(err)
			}
			// The stream delivers the end (stream.go).
			if !h.presence.ended(id, rules.First) {
				t.Fatal("the stream was not the seat's last")
			}
			h.unlist(context.WithoutCancel(ctx), id, rules.First)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			h, hooked := hookedHandler(t, 0)
			afterFirstRehold(h)
			id, _, black := newXiangqi(t, h)
			f := &holdNthListing{member: seatMember(id, rules.First), reached: make(chan struct{}), release: make(chan struct{})}
			hooked.AddHook(f)
			// The seat's stream is open here, the seat held and listed.
			h.presence.opened(ctx, id, rules.First)
			if !holdsFirst(t, h, id) {
				t.Fatal("the seat is not held")
			}
			// A release of this process's seats (its lease ran out while
			// it was paused) lets go of the seat.
			releasedHere(t, h, id)
			// The lease round after the fresh renewal holds the seat again:
			// its first listing passes, its commit lands, its second
			// listing (after the commit) is slow.
			f.nth = f.n.Load() + 2
			done := make(chan struct{})
			go func() {
				defer close(done)
				h.connect(ctx, id, rules.First, 1)
			}()
			// (A build without the listing after the commit finishes the
			// rehold first.)
			select {
			case <-f.reached:
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the rehold is stuck")
			}
			if !holdsFirst(t, h, id) {
				t.Fatal("the rehold did not commit")
			}
			c.after(ctx, h, id, black)
			close(f.release)
			<-done
			h.retryPresence(ctx)
			if h.presence.holds(seatKey{id, rules.First}) {
				t.Fatal("presence still holds the seat")
			}
			if isListed(t, h, id) {
				t.Error("the seat is on this process's presence list though no stream of it is open here: " +
					"the rehold's listing after its commit landed after the seat's unlisting, and nothing takes it off while the process lives")
			}
		})
	}
}

// TestALateListingsLetGoTookDownAnotherStreamsCount: a listing after its
// commit that landed after the seat's closing was followed by a let-go,
// after the closing had let go in the game already. On a game whose seat
// also carries a count stored before holders were named (a stream of it
// open in a process that counts without naming itself), model.LetGo takes
// that count down for a process not among the holders: the let-go took
// down the other stream's connection, and the opponent was told the seat
// disconnected while a stream of it was open. The late listing only
// unlists.
func TestALateListingsLetGoTookDownAnotherStreamsCount(t *testing.T) {
	ctx := t.Context()
	h, hooked := hookedHandler(t, 0)
	afterFirstRehold(h)
	id, _, _ := newXiangqi(t, h)
	// A stream of the first seat, counted without a holder's name.
	conns := legacyCount(t, h, id)
	f := &holdNthListing{member: seatMember(id, rules.First), reached: make(chan struct{}), release: make(chan struct{})}
	hooked.AddHook(f)
	h.presence.opened(ctx, id, rules.First)
	if !holdsFirst(t, h, id) {
		t.Fatal("the seat is not held")
	}
	// A release of this process's seats lets go of the seat.
	releasedHere(t, h, id)
	if n, _ := conns(); n != 1 {
		t.Fatalf("after the release: %d connections, want the legacy stream's 1", n)
	}
	// The rehold commits, its listing after the commit is slow.
	f.nth = f.n.Load() + 2
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.connect(ctx, id, rules.First, 1)
	}()
	select {
	case <-f.reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the rehold is stuck")
	}
	// The seat's stream here closes (grace 0): LetGo committed, 2 -> 1.
	h.presence.closed(context.WithoutCancel(ctx), id, rules.First)
	if n, _ := conns(); n != 1 {
		t.Fatalf("after the closing: %d connections, want the legacy stream's 1", n)
	}
	close(f.release)
	<-done
	h.retryPresence(ctx)
	if n, hs := conns(); n != 1 {
		t.Errorf("%d connections of the first seat (holders %v), want 1: the let-go after the late listing took down "+
			"the count of a stream still open elsewhere, the seat shown disconnected", n, hs)
	}
}

// failNthListing fails the nth SADD of member as an unreachable node
// would.
type failNthListing struct {
	member string
	nth    int32
	n      atomic.Int32
}

func (f *failNthListing) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failNthListing) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "sadd") && slices.ContainsFunc(cmd.Args(), func(a any) bool { s, _ := a.(string); return s == f.member }) {
			if f.n.Add(1) == f.nth {
				err := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
				cmd.SetErr(err)
				return err
			}
		}
		return next(ctx, cmd)
	}
}

func (f *failNthListing) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// legacyCount stores on the first seat of game id a count of one
// stream, kept before holders were named (a process of an older build).
func legacyCount(t *testing.T, h *Handler, id string) func() (int, []string) {
	t.Helper()
	ctx := t.Context()
	if _, err := h.exec(ctx, "presence", command{id: id, run: func(st *model.State, _ time.Time) (model.Change, error) {
		ch, ok := model.Hold(st, rules.First, "legacy")
		if !ok {
			return model.Change{}, errNothingToRecord
		}
		ch.State.Holders[rules.First] = nil
		return ch, nil
	}}); err != nil {
		t.Fatal(err)
	}
	conns := func() (int, []string) {
		l, err := h.store.LoadHead(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return l.State.Connections[rules.First], l.State.Holders[rules.First]
	}
	if n, hs := conns(); n != 1 || len(hs) != 0 {
		t.Fatalf("setup: %d connections, holders %v", n, hs)
	}
	return conns
}

// TestAFailedListingAfterTheCommitLetGoTwice: an opening committed the
// seat held, and its listing after the commit failed: it queued the
// opening (+1). The seat's stream then closes
// (--presence-grace 0, or the held-back closing comes due before the next
// lease round): its closing let go in the game, the process named. The
// queued change, retried as what the process held then (nothing), was a
// second let-go, of a process the game no longer named: model.LetGo took
// down the count of another stream (one counted before holders were
// named), and the opponent was told the seat disconnected while that
// stream was open. The failed listing is retried as a listing.
func TestAFailedListingAfterTheCommitLetGoTwice(t *testing.T) {
	ctx := t.Context()
	h, hooked := hookedHandler(t, 0)
	afterFirstRehold(h)
	id, _, _ := newXiangqi(t, h)
	conns := legacyCount(t, h, id)
	// The first listing (before the commit) passes, the second fails.
	hooked.AddHook(&failNthListing{member: seatMember(id, rules.First), nth: 2})
	h.presence.opened(ctx, id, rules.First)
	if !holdsFirst(t, h, id) {
		t.Fatal("the opening did not commit")
	}
	if n, _ := conns(); n != 2 {
		t.Fatalf("after the opening: %d connections, want 2", n)
	}
	// The stream closes: LetGo of this process, 2 -> 1.
	h.presence.closed(context.WithoutCancel(ctx), id, rules.First)
	if n, _ := conns(); n != 1 {
		t.Fatalf("after the closing: %d connections, want the legacy stream's 1", n)
	}
	// The next lease round retries what failed.
	h.retryPresence(ctx)
	if n, hs := conns(); n != 1 {
		t.Errorf("%d connections of the first seat (holders %v), want 1: the retry of the failed listing after the commit "+
			"let go a second time, taking down the count of a stream still open elsewhere", n, hs)
	}
	if isListed(t, h, id) {
		t.Error("the seat is still listed")
	}
}

// failNextCommitOf fails, once armed, the next script call (the commit)
// naming game id, as an unreachable node would: before it is sent, or,
// with stored, after it ran on Redis, its answer lost (a reset connection
// after the write, or a commit stored on the master whose wait for
// replicas failed).
type failNextCommitOf struct {
	id     string
	stored bool
	armed  atomic.Bool
	hit    atomic.Int32
}

func (f *failNextCommitOf) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failNextCommitOf) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.armed.Load() && isScript(cmd) && names(cmd, f.id) && f.armed.CompareAndSwap(true, false) {
			if f.stored {
				if err := next(ctx, cmd); err != nil {
					return err
				}
			}
			f.hit.Add(1)
			return connectionReset(cmd)
		}
		return next(ctx, cmd)
	}
}

// isScript reports whether cmd runs a script (a game's commit among them).
func isScript(cmd redis.Cmder) bool {
	switch strings.ToLower(cmd.Name()) {
	case "evalsha", "eval", "fcall":
		return true
	}
	return false
}

// names reports whether an argument of cmd names game id.
func names(cmd redis.Cmder, id string) bool {
	return slices.ContainsFunc(cmd.Args(), func(a any) bool { s, ok := a.(string); return ok && strings.Contains(s, id) })
}

// connectionReset fails cmd as a connection reset would.
func connectionReset(cmd redis.Cmder) error {
	err := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	cmd.SetErr(err)
	return err
}

func (f *failNextCommitOf) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestARetriedClosingLetGoAgainAfterTheSeatsNextClosing: a retried change
// let go a second time, of a process the game no longer named, taking
// down the count of a stream counted before holders were named, through a
// failed closing. A closing whose commit failed is queued (-1). The seat
// opens again here (the game still names this process: nothing to record)
// and closes again, this closing letting go in the game. The next lease
// round found the seat not held and retried the queued closing as a
// let-go: model.LetGo of a process the game does not name took down the
// other stream's count, and the opponent was told the seat disconnected
// while that stream was open. A closing that let go settles a closing
// queued before it.
func TestARetriedClosingLetGoAgainAfterTheSeatsNextClosing(t *testing.T) {
	ctx := t.Context()
	h, hooked := hookedHandler(t, 0)
	afterFirstRehold(h)
	id, _, _ := newXiangqi(t, h)
	conns := legacyCount(t, h, id)
	f := &failNextCommitOf{id: id}
	hooked.AddHook(f)

	h.presence.opened(ctx, id, rules.First)
	if n, _ := conns(); n != 2 {
		t.Fatalf("after the opening: %d connections, want 2", n)
	}
	// The stream closes; its commit fails: queued for the next round.
	f.armed.Store(true)
	h.presence.closed(context.WithoutCancel(ctx), id, rules.First)
	if f.hit.Load() != 1 {
		t.Fatal("setup: the closing's commit was not failed")
	}
	if n, _ := conns(); n != 2 || !holdsFirst(t, h, id) {
		t.Fatalf("setup: after the failed closing %d connections, want 2, held", n)
	}
	// The client reconnects here and leaves again before the next round.
	h.presence.opened(ctx, id, rules.First)
	h.presence.closed(context.WithoutCancel(ctx), id, rules.First)
	if n, _ := conns(); n != 1 {
		t.Fatalf("after the second closing: %d connections, want the legacy stream's 1", n)
	}
	// The next lease round retries the queued closing.
	h.retryPresence(ctx)
	if n, hs := conns(); n != 1 {
		t.Errorf("%d connections of the first seat (holders %v), want 1: the retried closing let go a second time, "+
			"taking down the count of a stream still open elsewhere", n, hs)
	}
	if isListed(t, h, id) {
		t.Error("the seat is still listed")
	}
}

// TestARetriedClosingAfterAnOlderBuildDroppedTheNameLetsGo: during a
// rolling upgrade from a build before holders were named, an older process
// writing the game drops Holders (model.Format: "an older build ... would
// drop the fields it does not know"), leaving this process's count
// unnamed. This process's closing failed to commit (queued -1); retried,
// it must let go of that count, as a first closing does, or the seat
// stays connected for good (no reaper releases an unnamed count).
func TestARetriedClosingAfterAnOlderBuildDroppedTheNameLetsGo(t *testing.T) {
	ctx := t.Context()
	h, hooked := hookedHandler(t, 0)
	afterFirstRehold(h)
	id, _, _ := newXiangqi(t, h)
	f := &failNextCommitOf{id: id}
	hooked.AddHook(f)
	h.presence.opened(ctx, id, rules.First)
	if !holdsFirst(t, h, id) {
		t.Fatal("setup: not held")
	}
	f.armed.Store(true)
	h.presence.closed(context.WithoutCancel(ctx), id, rules.First)
	if f.hit.Load() != 1 {
		t.Fatal("setup: the closing's commit was not failed")
	}
	// An older build writes the game (a move of the opponent it serves):
	// the holders' names are lost, the count kept.
	if _, err := h.exec(ctx, "presence", command{id: id, run: func(st *model.State, _ time.Time) (model.Change, error) {
		n := *st
		n.Holders = [2][]string{}
		return model.Change{State: &n}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	l, err := h.store.LoadHead(ctx, id)
	if err != nil || l.State.Connections[rules.First] != 1 || len(l.State.Holders[rules.First]) != 0 {
		t.Fatalf("setup: %+v %v", l.State.Connections, err)
	}
	h.retryPresence(ctx)
	l, err = h.store.LoadHead(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if n := l.State.Connections[rules.First]; n != 0 {
		t.Errorf("%d connections of the first seat after the retried closing, want 0: no stream of it is open anywhere, "+
			"and the seat stays shown connected for good", n)
	}
}

// TestAQueuedOpeningStoredAllTheSameLetGoASecondTime: an opening whose
// commit was stored but answered as failed (its reply lost, or its wait
// for replicas failed) is queued (+1), the game naming this process. The
// stream closes: the closing lets go in the game (the process named). The
// queued opening, retried at the next round as what the process held
// (nothing), was a let-go of a process the game no longer named, which
// took down the count of another stream (one counted before holders were
// named). A closing that let go settles any change queued before it.
func TestAQueuedOpeningStoredAllTheSameLetGoASecondTime(t *testing.T) {
	ctx := t.Context()
	h, hooked := hookedHandler(t, 0)
	afterFirstRehold(h)
	id, _, _ := newXiangqi(t, h)
	conns := legacyCount(t, h, id)
	f := &failNextCommitOf{id: id, stored: true}
	hooked.AddHook(f)

	f.armed.Store(true)
	h.presence.opened(ctx, id, rules.First)
	if f.hit.Load() != 1 {
		t.Fatal("setup: the opening's commit answer was not lost")
	}
	if n, _ := conns(); n != 2 || !holdsFirst(t, h, id) {
		t.Fatalf("setup: after the opening stored all the same: %d connections, want 2, named", n)
	}
	h.retryMu.Lock()
	d, queued := h.retry[seatKey{id, rules.First}]
	h.retryMu.Unlock()
	if !queued || d != 1 {
		t.Fatalf("setup: queued %v %d, want the opening (+1)", queued, d)
	}
	// The stream closes before the next lease round: let go in the game.
	h.presence.closed(context.WithoutCancel(ctx), id, rules.First)
	if n, _ := conns(); n != 1 {
		t.Fatalf("after the closing: %d connections, want the legacy stream's 1", n)
	}
	// The next lease round retries the queued opening.
	h.retryPresence(ctx)
	if n, hs := conns(); n != 1 {
		t.Errorf("%d connections of the first seat (holders %v), want 1: the retried opening let go a second time, "+
			"taking down the count of a stream still open elsewhere", n, hs)
	}
}

// reopenInCommit, once armed, runs then after the next script call
// (the commit) naming game id has run on Redis, before its answer reaches
// the caller: the window between a closing's commit and what record does
// after it. failSAdd, once armed, fails the next SADD naming the game (a
// seat's listing), as a Redis blip would.
type reopenInCommit struct {
	id       string
	armed    atomic.Bool
	then     func()
	failSAdd atomic.Bool
	hit      atomic.Int32
	failed   atomic.Int32
}

func (f *reopenInCommit) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *reopenInCommit) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "sadd") && f.failSAdd.Load() && names(cmd, f.id) && f.failSAdd.CompareAndSwap(true, false) {
			f.failed.Add(1)
			return connectionReset(cmd)
		}
		if f.armed.Load() && isScript(cmd) && names(cmd, f.id) && f.armed.CompareAndSwap(true, false) {
			err := next(ctx, cmd)
			f.hit.Add(1)
			f.then()
			return err
		}
		return next(ctx, cmd)
	}
}

func (f *reopenInCommit) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAClosingKeepsTheQueuedOpeningOfTheSeatsNextStream: the seat's last
// stream here closes; its closing commits the let-go. While that commit is
// on its way back, a new stream of the seat opens here (a phone
// reconnecting), and its opening's listing fails (a Redis blip): the
// opening is queued (+1) for the next lease round. The older closing, back
// from its commit, settles the changes queued before it; had it taken the
// new stream's opening for one, nothing would record that opening: the
// stream open here, the seat listed, and the game with it not held, the
// opponent told it disconnected for good.
func TestAClosingKeepsTheQueuedOpeningOfTheSeatsNextStream(t *testing.T) {
	ctx := t.Context()
	h, hooked := hookedHandler(t, 0)
	afterFirstRehold(h)
	id, _, _ := newXiangqi(t, h)
	f := &reopenInCommit{id: id}
	f.then = func() {
		// The seat's next stream opens here, its listing failing.
		f.failSAdd.Store(true)
		h.presence.opened(ctx, id, rules.First)
	}
	hooked.AddHook(f)

	h.presence.opened(ctx, id, rules.First)
	if !holdsFirst(t, h, id) {
		t.Fatal("setup: not held")
	}
	f.armed.Store(true)
	h.presence.closed(context.WithoutCancel(ctx), id, rules.First)
	if f.hit.Load() != 1 || f.failed.Load() != 1 {
		t.Fatalf("setup: commit hooked %d, listing failed %d, want 1 and 1", f.hit.Load(), f.failed.Load())
	}
	k := seatKey{id, rules.First}
	if !h.presence.holds(k) {
		t.Fatal("setup: the new stream is not open here")
	}
	h.retryMu.Lock()
	d, queued := h.retry[k]
	h.retryMu.Unlock()
	// The next lease rounds retry what is queued.
	for range 3 {
		h.retryPresence(ctx)
	}
	if !holdsFirst(t, h, id) {
		l, _ := h.store.LoadHead(ctx, id)
		t.Errorf("a stream of the seat is open here (listed: %v), yet after the lease rounds the game has it not held "+
			"(connections %d, holders %v): the new stream's queued opening (queued after the closing: %v %d) was "+
			"deleted by the older closing, and the opponent sees the seat disconnected for good",
			isListed(t, h, id), l.State.Connections[rules.First], l.State.Holders[rules.First], queued, d)
	}
}
