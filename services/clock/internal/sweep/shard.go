package sweep

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/deadline"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// Backoffs of failed work: a failing shard read, and one entry whose
// ExpireDeadline failed (kept, retried, never lost); and of the re-checks
// of a recent entry that is not (yet) its game's current deadline.
const (
	minBackoff   = 50 * time.Millisecond
	maxBackoff   = time.Second
	firstRecheck = 10 * time.Millisecond
	// maxRetryWait bounds the wait of an entry whose game is briefly
	// behind (see decide).
	maxRetryWait = time.Second
)

// outcome is what to do with one due entry.
type outcome struct {
	kind   string // metric label
	remove bool
	// retryIn, for a kept entry: when to try again; 0 backs off.
	retryIn time.Duration
	// recheck: kept because it may still become current, not because
	// something failed.
	recheck bool
	// err is the failure of an "error" outcome.
	err error
}

// shard is the sweeping state of one shard this replica holds (or is
// handing over).
type shard struct {
	id  int
	key string
	mu  sync.Mutex
	// inflight entries are being handed to the game service.
	inflight map[string]bool
	// retry holds entries kept after a failure, with the time before
	// which they are skipped, so one broken game cannot clog the shard.
	retry map[string]*retryState
	// done holds entries handled since the last read began: that read
	// may still list them (their removal raced it).
	done map[string]time.Time
	// full: the last read found more due entries than Batch allows in
	// flight; a finished call wakes the scanner.
	full bool
}

func newShard(id int, key string) *shard {
	return &shard{id: id, key: key, inflight: map[string]bool{}, retry: map[string]*retryState{}, done: map[string]time.Time{}}
}

type retryState struct {
	at      time.Time
	backoff time.Duration
}

// scan sweeps every shard this replica holds: one pipelined read of all
// of them, each due entry handed to the game service as soon as it is due
// without waiting for the calls of earlier entries (a slow game must not
// delay the others), then a sleep until the earliest next entry or at
// most Poll. One loop for all shards keeps the cost of an idle replica
// independent of the number of shards.
func (s *Service) scan(ctx context.Context) {
	var backoff time.Duration
	for ctx.Err() == nil {
		s.mu.Lock()
		shards := make([]*shard, 0, len(s.sweeping))
		for _, sh := range s.sweeping {
			shards = append(shards, sh)
		}
		s.mu.Unlock()
		wait := s.cfg.Poll
		if len(shards) > 0 {
			w, err := s.pass(ctx, shards)
			switch {
			case err != nil && ctx.Err() == nil:
				backoff = min(max(2*backoff, minBackoff), maxBackoff)
				s.log.Warn("read due deadlines", "shards", len(shards), "err", err, "retry_in", backoff)
				wait = backoff
			case err == nil:
				backoff, wait = 0, w
			}
		}
		if wait <= 0 {
			continue // more is due right now
		}
		t := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-s.wake:
		}
		t.Stop()
	}
}

// pass reads the shards once and dispatches what is due; it returns how
// long to sleep, and an error only when no shard could be read.
func (s *Service) pass(ctx context.Context, shards []*shard) (time.Duration, error) {
	keys := make([]string, 0, len(shards))
	limits := make([]int, 0, len(shards))
	read := shards[:0:0]
	for _, sh := range shards {
		sh.mu.Lock()
		// A shard with Batch calls in flight has nothing to start: it is
		// read again when one ends. Otherwise the read must reach past
		// the entries in flight and those waiting for a retry, which are
		// the earliest.
		if len(sh.inflight) < s.cfg.Batch {
			read = append(read, sh)
			keys = append(keys, sh.key)
			limits = append(limits, s.cfg.Batch+len(sh.retry))
		} else {
			sh.full = true
		}
		sh.mu.Unlock()
	}
	if len(read) == 0 {
		return s.cfg.Poll, nil
	}
	shards = read
	readAt := time.Now()
	due, errs := fetchDueMany(ctx, s.rdb, keys, limits)
	now := time.Now()
	wait := s.cfg.Poll
	var failed []error
	for i, sh := range shards {
		if errs[i] != nil {
			failed = append(failed, errs[i])
			s.health[sh.id].errors.Add(1)
			s.m.outcomes.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "error")))
			continue
		}
		s.health[sh.id].lastSweepMs.Store(now.UnixMilli())
		wait = min(wait, s.dispatch(ctx, sh, due[i], limits[i], readAt, now))
	}
	if len(failed) == len(shards) {
		return 0, errors.Join(failed...)
	}
	if len(failed) > 0 {
		s.log.Warn("read due deadlines of some shards", "failed", len(failed), "of", len(shards), "err", failed[0])
		wait = min(wait, minBackoff)
	}
	return wait, nil
}

// dispatch starts a call for every due entry of one read that is not in
// flight, recently handled or waiting for a retry; it returns how long
// the shard may sleep (0: more is due now).
func (s *Service) dispatch(ctx context.Context, sh *shard, due dueSet, limit int, readAt, now time.Time) time.Duration {
	var soonest time.Time
	sh.mu.Lock()
	sh.full = false
	// Every entry read is listed, those past the in-flight limit too: an
	// entry the read did not list is gone, and loses its retry backoff.
	listed := make(map[string]bool, len(due.members))
	for _, m := range due.members {
		listed[m] = true
	}
	for _, m := range due.members {
		if sh.inflight[m] || sh.done[m].After(readAt) {
			continue
		}
		if r := sh.retry[m]; r != nil && now.Before(r.at) {
			if soonest.IsZero() || r.at.Before(soonest) {
				soonest = r.at
			}
			continue
		}
		if len(sh.inflight) >= s.cfg.Batch {
			sh.full = true
			break
		}
		sh.inflight[m] = true
		s.calls.Go(func() { s.handle(ctx, sh, m) })
	}
	if len(due.members) < limit {
		// A complete read: what it did not list is gone.
		for m := range sh.retry {
			if !listed[m] {
				delete(sh.retry, m)
			}
		}
	}
	for m, t := range sh.done {
		if !t.After(readAt) {
			delete(sh.done, m)
		}
	}
	full := sh.full
	sh.mu.Unlock()
	if len(due.members) >= limit && !full {
		return 0
	}
	wait := s.cfg.Poll
	if due.nextMs != 0 {
		wait = min(wait, time.Duration(due.nextMs-due.nowMs)*time.Millisecond-time.Since(now))
	}
	if !soonest.IsZero() {
		wait = min(wait, time.Until(soonest))
	}
	return max(wait, time.Millisecond)
}

func (s *Service) wakeScanner() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// handle hands one due entry to the game service and removes it or
// schedules its retry.
func (s *Service) handle(ctx context.Context, sh *shard, m string) {
	var o outcome
	e, err := deadline.ParseMember(m)
	switch {
	case err != nil:
		// Nothing can ever handle it; keeping it would only clog the shard.
		s.log.Error("dropping a malformed deadline entry", "shard", sh.id, "member", m, "err", err)
		o = outcome{kind: "stale", remove: true}
	default:
		select {
		case s.sem <- struct{}{}:
			o = s.expire(ctx, sh.id, e)
			<-s.sem
		case <-ctx.Done():
			o = outcome{kind: "retry"}
		}
	}
	h := &s.health[sh.id]
	// Counted, in stats and metrics alike, before the removal's round
	// trip, so that neither shows a flag (its lateness is already
	// recorded) without its count.
	s.m.outcomes.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attribute.String("outcome", o.kind)))
	switch o.kind {
	case "stale":
		h.stale.Add(1)
	case "error":
		h.errors.Add(1)
	case "retry", "recheck":
	default:
		h.expired.Add(1)
	}
	if o.remove {
		// Done even when ctx ended: the work is done and only a removal
		// makes it stick; a failure only means the entry is handed over
		// once more, which changes nothing.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.CallTimeout)
		if err := s.rdb.ZRem(rctx, sh.key, m).Err(); err != nil {
			h.errors.Add(1)
			s.log.Warn("remove a handled deadline", "shard", sh.id, "err", err)
		}
		cancel()
	}
	now := time.Now()
	sh.mu.Lock()
	delete(sh.inflight, m)
	wake := sh.full
	if o.remove {
		delete(sh.retry, m)
		sh.done[m] = now
	} else {
		r := sh.retry[m]
		if r == nil {
			r = &retryState{}
			sh.retry[m] = r
		}
		if o.err != nil {
			// The first failure of an entry is worth a warning; its
			// retries (the game service is down or overloaded) are not.
			level := slog.LevelDebug
			if r.backoff == 0 {
				level = slog.LevelWarn
			}
			s.log.Log(ctx, level, "expire deadline: kept for a retry", "shard", sh.id, "member", m, "err", o.err)
		}
		wait := o.retryIn
		if wait <= 0 {
			base := minBackoff
			if o.recheck {
				base = firstRecheck
			}
			r.backoff = min(max(2*r.backoff, base), maxBackoff)
			wait = r.backoff
		}
		r.at = now.Add(wait)
		wake = true
	}
	sh.mu.Unlock()
	if wake {
		s.wakeScanner()
	}
}

// expire asks the game service to apply one deadline.
func (s *Service) expire(ctx context.Context, shard int, e deadline.Entry) outcome {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	at := e.At.UnixMilli()
	began, done := s.calling()
	resp, err := s.games.ExpireDeadline(cctx, &gamev1.ExpireDeadlineRequest{GameId: e.GameID, DeadlineUnixMs: at})
	done()
	if err != nil {
		if status.Code(err) == codes.InvalidArgument {
			s.reached()
			s.log.Error("dropping a deadline entry the game service refuses", "shard", shard, "game", e.GameID, "err", err)
			return outcome{kind: "stale", remove: true}
		}
		if ctx.Err() != nil {
			return outcome{kind: "retry"}
		}
		s.unreached(began)
		return outcome{kind: "error", err: err}
	}
	s.reached()
	return s.decide(ctx, at, resp, time.Now())
}

// decide reads the game service's answer.
func (s *Service) decide(ctx context.Context, at int64, resp *gamev1.ExpireDeadlineResponse, now time.Time) outcome {
	g := resp.GetGame()
	if !resp.GetApplied() {
		if g == nil {
			// No such game. A new game's first deadline is indexed before
			// the commit that creates it, so a recent one is checked again
			// (on this process's clock: the game has none to give).
			if time.Duration(now.UnixMilli()-at)*time.Millisecond < s.cfg.StaleAfter {
				return outcome{kind: "recheck", recheck: true}
			}
			return outcome{kind: "stale", remove: true}
		}
		if finished(g.GetStatus()) {
			return outcome{kind: "stale", remove: true}
		}
		// The game service's time: its clocks' instant, else ours.
		gameNow := now.UnixMilli()
		if asOf := g.GetClocks().GetAsOf(); asOf != nil {
			gameNow = asOf.AsTime().UnixMilli()
		}
		if ahead := at - gameNow; ahead > 0 {
			// Not due there yet: the game's Redis node runs behind the
			// index's (Cluster). Retried when due there.
			return outcome{kind: "retry", retryIn: min(time.Duration(ahead)*time.Millisecond, maxRetryWait)}
		}
		if time.Duration(gameNow-at)*time.Millisecond < s.cfg.StaleAfter {
			// Not the current deadline, but it may be about to become
			// it: the game service indexes a deadline BEFORE the commit
			// that makes it current, and a near deadline can be due by
			// then. Removing it now could lose that timeout; it is
			// checked again, and removed once old enough.
			return outcome{kind: "recheck", recheck: true}
		}
		return outcome{kind: "stale", remove: true}
	}
	kind, commit := appliedKind(resp, now)
	lateMs := float64(commit.UnixMilli() - at)
	s.m.lateness.Record(ctx, max(lateMs, 0)/1000, metric.WithAttributes(attribute.String("kind", kind)))
	if kind == "flag" {
		s.late.observe(max(lateMs, 0))
	}
	return outcome{kind: kind, remove: true}
}

func finished(st commonv1.GameStatus) bool {
	return st == commonv1.GameStatus_GAME_STATUS_ENDED || st == commonv1.GameStatus_GAME_STATUS_ABORTED
}

// appliedKind names what an applied deadline did and the server time of
// its commit: the game's end, or the instant of the clocks it returned.
func appliedKind(resp *gamev1.ExpireDeadlineResponse, now time.Time) (string, time.Time) {
	g := resp.GetGame()
	commit := now
	if t := g.GetClocks().GetAsOf(); t != nil {
		commit = t.AsTime()
	}
	if t := g.GetEndedAt(); t != nil {
		commit = t.AsTime()
	}
	switch {
	case resp.GetExcused():
		// An outage moved the deadline later: what it will bring is to
		// come, at the new deadline.
		return "excuse", commit
	case g.GetStatus() == commonv1.GameStatus_GAME_STATUS_ABORTED:
		return "abort", commit
	case g.GetStatus() == commonv1.GameStatus_GAME_STATUS_ENDED && g.GetResult().GetMethod() == commonv1.EndMethod_END_METHOD_TIMEOUT:
		return "flag", commit
	case g.GetClocks().GetRunning() != commonv1.Side_SIDE_UNSPECIFIED:
		// Only a running clock has byo-yomi milestones.
		return "milestone", commit
	}
	// A default formation (the clock starts only after both first moves).
	return "setup", commit
}
