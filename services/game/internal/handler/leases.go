package handler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/services/game/internal/model"
	"github.com/palacehq/palace/services/game/internal/store"
)

// A seat's presence is the processes that hold a stream of it open (see
// presence and model.Hold). A process that stops records its streams
// closing; one that dies, or loses Redis for good, cannot. So each process
// keeps a lease in Redis (see store.Renew) and lists the games whose seats
// it holds; the first process to find a lease run out releases the seats
// of its games, and the opponents see those seats disconnected. A process
// whose lease ran out while it still lives (paused, or cut off from Redis
// for longer than the lease) finds it gone, or claimed, at its renewals
// and holds its seats again at each until the release is over.

// defaultPresenceLease is how long a process's holdings outlive its last
// renewal.
const defaultPresenceLease = 15 * time.Second

// reapBatch bounds the leases one round claims.
const reapBatch = 16

func newProcessID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// connect records a change of the seat's holding by this process, and
// reports whether it was announced (an event). Failure is logged, not
// returned: presence is informative and must not break the stream. A
// change that could not be recorded is tried again at the next lease
// renewal (see retryPresence), so that a closing lost to a Redis outage
// does not leave the seat connected.
func (h *Handler) connect(ctx context.Context, id string, side rules.Side, delta int) (announced bool) {
	return h.record(ctx, id, side, delta, false)
}

// record commits a change of a seat's holding, and reports whether it was
// announced; again marks the retry of one that failed.
func (h *Handler) record(ctx context.Context, id string, side rules.Side, delta int, again bool) (announced bool) {
	k := seatKey{id, side}
	if delta > 0 {
		// A seat held but not listed would stay connected for good if
		// this process died: those who reap its lease release only what
		// it listed. So no listing, no holding; both are tried again.
		if err := h.store.Holding(ctx, h.proc, id, side, h.now().Add(h.cfg.PresenceLease)); err != nil {
			h.presenceFailed(ctx, id, err)
			h.retryLater(k, delta)
			return false
		}
	}
	// gameHolds is whether the game had the seat held by this process
	// when the change was overtaken.
	gameHolds := false
	_, err := h.exec(ctx, "presence", command{
		id: id,
		run: func(st *model.State, _ time.Time) (model.Change, error) {
			announced = false // of the last run, the one committed
			// Holding is idempotent, so an opening and a closing of the
			// seat that race must be decided by what this process holds
			// when the change is committed (under the game's lock), not
			// by the order they reach Redis.
			if h.presence.holds(k) != (delta > 0) {
				gameHolds = !st.Status.Finished() && slices.Contains(st.Holders[side], h.proc)
				return model.Change{}, errOvertaken
			}
			change := model.Hold
			if delta < 0 {
				change = model.LetGo
			}
			ch, ok := change(st, side, h.proc)
			if !ok {
				return model.Change{}, errNothingToRecord
			}
			announced = len(ch.Events) > 0
			return ch, nil
		},
	})
	if again && errors.Is(err, errNothingToRecord) {
		// The failed attempt may have been stored all the same, with its
		// wait for replicas failed and its event unpublished: confirm it,
		// and have the streams read it.
		_, err = h.store.Confirm(ctx, id)
	}
	switch {
	case errors.Is(err, errOvertaken):
		if delta > 0 && !h.presence.holds(k) && !gameHolds {
			// Listed above for a seat whose closing came first, and was
			// taken off the list then: nothing else would take it off.
			// A seat the game still has held is left listed: its closing
			// is under way or failed and queued, and unlists it once it
			// lets go, whereas a crash meanwhile would leave it held and
			// unlisted, released by no reaper.
			h.unlistUnlessHeld(ctx, id, side)
		}
		return false
	case apierr.CodeOf(err) == apierr.NotFound:
		// The game expired: there is nothing to record, now or ever, and
		// nothing to hold.
		h.unlist(ctx, id, side)
		return false
	case err != nil && !errors.Is(err, errNothingToRecord):
		h.presenceFailed(ctx, id, err)
		h.retryLater(k, delta)
		return false
	}
	if delta < 0 {
		if !again {
			// This closing let go in the game (or found it let go): a
			// change queued before it is settled, a closing or an opening
			// alike, which retried now, the seat not held, would let go a
			// second time. An unlisting left queued only unlists. A seat
			// held again meanwhile is a newer stream's, whose change is
			// kept.
			h.retryMu.Lock()
			if d, queued := h.retry[k]; queued && d != unlistAgain && !h.presence.holds(k) {
				delete(h.retry, k)
			}
			h.retryMu.Unlock()
		}
		h.unlistUnlessHeld(ctx, id, side)
	} else if err == nil {
		// Listed again (and counted) after the commit: a release that read
		// the list before the seat was held in the game, and let go of the
		// game before the commit, finds the list moved and leaves the seat.
		if err := h.store.Holding(ctx, h.proc, id, side, h.now().Add(h.cfg.PresenceLease)); err != nil {
			// Retried as a listing: held then, the seat is recorded and
			// listed again; let go meanwhile, only unlisted, its closing
			// having let go in the game (a let-go of a process the game
			// no longer names would take down another stream's count).
			h.presenceFailed(ctx, id, err)
			h.retryUnlisting(k)
		} else if !h.presence.holds(k) {
			// The seat's last stream closed, or delivered the game's end,
			// while this listing was on its way: its unlisting may have
			// landed first.
			h.unlistUnlessGameHolds(ctx, id, side)
		}
	}
	return announced && err == nil
}

// unlistUnlessGameHolds unlists a seat listed again after its last stream
// here closed, as an overtaken opening does, unless the game still has it
// held by this process: its closing is under way, or failed and queued,
// and unlists it once it lets go. It lets nothing go itself: a let-go of a
// process the game does not name takes down a count stored before holders
// were named, another stream's.
func (h *Handler) unlistUnlessGameHolds(ctx context.Context, id string, side rules.Side) {
	gameHolds := false
	_, err := h.exec(ctx, "presence", command{
		id: id,
		run: func(st *model.State, _ time.Time) (model.Change, error) {
			gameHolds = !st.Status.Finished() && slices.Contains(st.Holders[side], h.proc)
			return model.Change{}, errNothingToRecord
		},
	})
	switch {
	case errors.Is(err, errNothingToRecord) && gameHolds:
		// Left to its closing.
	case errors.Is(err, errNothingToRecord), apierr.CodeOf(err) == apierr.NotFound:
		h.unlistUnlessHeld(ctx, id, side)
	default:
		h.presenceFailed(ctx, id, err)
		h.retryUnlisting(seatKey{id, side})
	}
}

var (
	errNothingToRecord = errors.New("nothing to record")
	errOvertaken       = errors.New("overtaken by a later change of the seat")
)

// retryLater remembers a change of a seat's holding that failed; any
// change queued of the seat stands for all (see retryPresence).
func (h *Handler) retryLater(k seatKey, delta int) {
	h.retryMu.Lock()
	defer h.retryMu.Unlock()
	h.retry[k] = delta
}

// retryPresence records again the changes that failed, as what this
// process holds of each seat now.
func (h *Handler) retryPresence(ctx context.Context) {
	h.retryMu.Lock()
	due := h.retry
	h.retry = map[seatKey]int{}
	h.retryMu.Unlock()
	for k, delta := range due {
		// What failed says only that something of the seat is to be done
		// again: what is done is decided by what this process holds now,
		// since later changes may have failed too, and a queued one may
		// stand for any of them.
		switch {
		case h.presence.holds(k):
			// Held: in the game, and listed.
			h.record(ctx, k.id, k.side, 1, true)
		case delta == unlistAgain:
			h.unlistUnlessHeld(ctx, k.id, k.side)
		default:
			// Not held (an opening cut short among them): let go in the
			// game, if held there, and unlisted.
			h.record(ctx, k.id, k.side, -1, true)
		}
	}
}

// unlistAgain marks, among the changes to retry, a seat whose holding was
// recorded let go but which is still on this process's list.
const unlistAgain = 0

// unlist takes a seat this process no longer holds off its list; one that
// fails is tried again at the next renewal, so that the list does not
// grow by every seat let go during a Redis outage.
func (h *Handler) unlist(ctx context.Context, id string, side rules.Side) {
	if err := h.store.NotHolding(ctx, h.proc, id, side); err != nil {
		h.presenceFailed(ctx, id, err)
		h.retryUnlisting(seatKey{id, side})
	}
}

// unlistUnlessHeld unlists a seat found not held, and lists it again
// should a stream of it have opened meanwhile: that opening listed the
// seat before it committed, and an unlisting reaching Redis after would
// leave a held seat that no reaper of this process's lease releases,
// connected for good. An opening counts its stream before it lists the
// seat, so either the check after the unlisting sees it, or its listing
// comes after. A listing again is checked alike, for that stream may have
// left meanwhile, its own unlisting landing first; a seat that keeps
// opening and closing is left to the next lease round.
func (h *Handler) unlistUnlessHeld(ctx context.Context, id string, side rules.Side) {
	k := seatKey{id, side}
	for range 3 {
		h.unlist(ctx, id, side)
		if !h.presence.holds(k) {
			return
		}
		if err := h.store.Holding(ctx, h.proc, id, side, h.now().Add(h.cfg.PresenceLease)); err != nil {
			h.presenceFailed(ctx, id, err)
			h.retryLater(k, 1)
			return
		}
		if h.presence.holds(k) {
			return
		}
	}
	h.retryUnlisting(k)
}

// retryUnlisting queues the unlisting of a seat for the next lease round,
// unless a change of the seat is queued already: retried, any change
// unlists a seat no longer held too, and only a change lets it go in the
// game, where a closing that failed left it held.
func (h *Handler) retryUnlisting(k seatKey) {
	h.retryMu.Lock()
	defer h.retryMu.Unlock()
	if _, queued := h.retry[k]; !queued {
		h.retry[k] = unlistAgain
	}
}

// presenceFailed logs a change of a seat's holding that could not be
// recorded, and is to be tried again. One cut short because the client
// left while its stream was opening is routine (apps reconnect quickly,
// by the thousand after a rollout) and is retried like any other: a
// warning for each would bury those that say Redis is in trouble.
func (h *Handler) presenceFailed(ctx context.Context, id string, err error) {
	level := slog.LevelWarn
	if ctx.Err() != nil {
		level = slog.LevelDebug
	}
	h.log.Log(ctx, level, "presence", "game", id, "err", err)
}

// keepRenewing renews this process's lease every third of it until ctx
// ends, on its own: the lease tells the other processes, and the ones
// that start, that this one serves, so nothing that waits for a game
// (keepLease's retries and releases) may hold it up. After a failure it
// tries again within a second, so that a process whose first renewals
// failed learns the service's silences soon; after a broken contact with
// Redis it renews at once (renewSoon).
func (h *Handler) keepRenewing(ctx context.Context) {
	every := h.cfg.PresenceLease / 3
	next := func() time.Duration {
		if h.renewUnsure.Load() {
			return min(every, time.Second)
		}
		return every
	}
	t := time.NewTimer(next())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.renewSoon:
			t.Stop()
		}
		h.renew(ctx)
		t.Reset(next())
	}
}

// keepLease holds this process's seats again when its lease was found
// gone or claimed, records again the changes of presence that failed,
// and releases the seats of the processes whose leases ran out, until ctx
// ends. Releases run on their own, so that one of many games cannot hold
// up the others.
func (h *Handler) keepLease(ctx context.Context) {
	t := time.NewTicker(h.cfg.PresenceLease / 3)
	defer t.Stop()
	var releases sync.WaitGroup
	defer releases.Wait()
	for {
		h.syncTime(ctx)
		if h.rehold.Swap(false) {
			for _, k := range h.presence.held() {
				h.connect(ctx, k.id, k.side, 1)
			}
		}
		h.retryPresence(ctx)
		h.reap(ctx, &releases)
		h.cache.sweep()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// renew extends the lease; when it was gone or claimed (or the renewal
// may have run before, its answer lost), this process is to hold its
// seats again (keepLease), since another may have released them. It takes the silences of the service (see store.Renew) as
// outages: nobody could move in them either. It reports whether the lease
// was renewed.
func (h *Handler) renew(ctx context.Context) bool {
	now := h.now()
	broken, contact := h.contact.untold(), h.contact.began(now)
	r, err := h.store.Renew(ctx, h.proc, now.Add(h.cfg.PresenceLease), now, contact, broken, h.silencesSeen)
	if err != nil {
		// The script may have run, its answer lost: the lease it made may
		// have been fresh, and nothing would tell the next renewal so.
		h.renewUnsure.Store(true)
		if ctx.Err() == nil {
			h.log.WarnContext(ctx, "presence lease", "err", err)
		}
		return false
	}
	for _, s := range r.Recorded {
		h.metrics.silences.Add(ctx, 1)
		h.log.WarnContext(ctx, "no game process held a lease (every one stopped, or cut off from Redis): the turns (and waits) under way then are not charged that time",
			"silence", time.Duration(s.To-s.From)*time.Millisecond, "from", time.UnixMilli(s.From).UTC())
	}
	for _, s := range r.Silences {
		h.silencesSeen = max(h.silencesSeen, s.To)
		// Those that ended before this process started were told by the
		// process that found them.
		if h.outages.silent(span{from: s.From, to: s.To}) && !slices.Contains(r.Recorded, s) && s.To >= h.started {
			h.log.InfoContext(ctx, "no game process ran for a while: the turns (and waits) under way then are not charged it",
				"silence", time.Duration(s.To-s.From)*time.Millisecond, "from", time.UnixMilli(s.From).UTC())
		}
	}
	h.contact.told(broken, contact.UnixMilli())
	if unsure := h.renewUnsure.Swap(false); r.Fresh || unsure {
		h.rehold.Store(true)
	}
	return true
}

// reap claims the leases that ran out and releases their seats.
func (h *Handler) reap(ctx context.Context, releases *sync.WaitGroup) {
	procs, err := h.store.Expired(ctx, h.now(), reapBatch)
	if err != nil {
		if ctx.Err() == nil {
			h.log.WarnContext(ctx, "presence leases", "err", err)
		}
		return
	}
	for _, entry := range procs {
		if entry == h.proc || entry == store.ClaimOf(h.proc) {
			continue // renewed in a moment, which ends a claim run out
		}
		now := h.now()
		proc, err := h.store.Claim(ctx, entry, now, now.Add(h.cfg.PresenceLease))
		if err != nil || proc == "" {
			continue
		}
		releases.Go(func() {
			if err := h.releaseAll(ctx, proc); err != nil {
				// A later round, here or elsewhere, finishes the release:
				// at once if the claim can be let go now, else once it
				// runs out.
				h.log.WarnContext(ctx, "release the seats of a process whose lease ran out", "process", proc, "err", err)
				if err := h.store.Unclaim(context.WithoutCancel(ctx), proc); err != nil {
					h.log.WarnContext(ctx, "presence leases", "err", err)
				}
			}
		})
	}
}

// releaseAll lets go of every seat proc holds, then forgets proc unless
// it came back meanwhile.
func (h *Handler) releaseAll(ctx context.Context, proc string) error {
	listed, err := h.store.Listing(ctx, proc)
	if err != nil {
		return err
	}
	ids := store.GamesOf(listed.Seats)
	// A game that cannot be released now (one a newer version stored
	// during a rolling upgrade) holds back none of the others; the process
	// is forgotten only once all are released, so the next attempt, here
	// or on another replica, tries that one again.
	var first error
	for _, id := range ids {
		// The claim is kept while the release goes on, however long it
		// takes: a process back meanwhile holds its seats again at every
		// renewal until the claim runs out, after the release's last
		// commit.
		on, err := h.store.KeepClaim(ctx, proc, h.now().Add(h.cfg.PresenceLease))
		if err != nil {
			return err
		}
		if !on {
			// Another release, which took up a claim this one let run
			// out, ended it: what is left to do is its.
			return nil
		}
		_, err = h.exec(ctx, "presence", command{
			id: id,
			run: func(st *model.State, _ time.Time) (model.Change, error) {
				ch, ok := model.Release(st, proc)
				if !ok {
					return model.Change{}, errNothingToRecord
				}
				return ch, nil
			},
		})
		if err != nil && !errors.Is(err, errNothingToRecord) && apierr.CodeOf(err) != apierr.NotFound && first == nil {
			first = err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if first != nil {
		return first
	}
	h.log.InfoContext(ctx, "released the seats of a process whose lease ran out", "process", proc, "games", len(ids))
	return h.store.Released(ctx, proc, listed)
}
