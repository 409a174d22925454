package sweep

import (
	"context"
	"sync"
	"time"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// A replica whose calls the game service does not take (it cannot reach
// the game service, or presents a credential the game service refuses,
// say keys a rotation left behind) would go on holding its shards,
// renewing their leases in Redis, while their games were never flagged.
// Once every call it made for HandOverAfter has failed, or gone
// unanswered, and a probe fails too, it hands its shards to the other
// replicas, takes none, and probes the game service until one is
// answered; meanwhile it reports itself not reachable (OnReach), which
// the clock service shows as NOT_SERVING.

// probeGameID names no game (game ids have no dash): the game service
// answers a probe as it answers an unknown game's deadline, once it has
// checked the caller's credential, without writing anything.
const probeGameID = "clock-probe"

// probeEvery spaces the probes of a replica that handed its shards over.
const probeEvery = time.Second

// probeTimeout bounds a probe (or CallTimeout, if shorter): a game
// service that is up answers one at once, with one small read that finds
// no game, so a probe of a silent one need not wait out a whole call's
// timeout before the shards go to the other replicas.
const probeTimeout = time.Second

type reach struct {
	mu sync.Mutex
	// failingSince is when the first call that failed since the last
	// success began; zero while the last call succeeded.
	failingSince time.Time
	// calls holds when each call under way began; answered is when the
	// last success came. A call under way that began after it and is not
	// answered yet counts as failing from its start: a game service that
	// went silent (a frozen host) fails a call only at its timeout.
	calls      map[uint64]time.Time
	lastCall   uint64
	answered   time.Time
	handedOver bool
	// drop is set by the probe that confirms the loss: the next tick
	// gives the shards up, so that only ticks change what is owned.
	drop      bool
	probing   bool
	lastProbe time.Time
}

// calling records a call to the game service that begins now; done
// records its end, before it is told reached or unreached.
func (s *Service) calling() (began time.Time, done func()) {
	began = time.Now()
	s.reach.mu.Lock()
	if s.reach.calls == nil {
		s.reach.calls = make(map[uint64]time.Time)
	}
	s.reach.lastCall++
	id := s.reach.lastCall
	s.reach.calls[id] = began
	s.reach.mu.Unlock()
	return began, func() {
		s.reach.mu.Lock()
		delete(s.reach.calls, id)
		s.reach.mu.Unlock()
	}
}

// failingSinceLocked is when the calls began to fail: the first failed
// call's start, or an earlier one of a call under way that began after
// the last answer. Zero while none fails; s.reach.mu is held.
func (s *Service) failingSinceLocked() time.Time {
	since := s.reach.failingSince
	for _, began := range s.reach.calls {
		if began.After(s.reach.answered) && (since.IsZero() || began.Before(since)) {
			since = began
		}
	}
	return since
}

// reached records a call the game service answered.
func (s *Service) reached() {
	s.reach.mu.Lock()
	was := s.reach.handedOver
	s.reach.failingSince, s.reach.handedOver, s.reach.drop = time.Time{}, false, false
	s.reach.answered = time.Now()
	s.reach.mu.Unlock()
	if was {
		s.log.Info("the game service answers this replica again; taking shards")
		s.notifyReach()
	}
}

// unreached records a call begun at began that failed for want of the
// game service. It fails from no earlier than the last answer: a call
// answered after it began shows the game service up then (one game's
// call may hang while the others are answered).
func (s *Service) unreached(began time.Time) {
	s.reach.mu.Lock()
	began = later(began, s.reach.answered)
	if s.reach.failingSince.IsZero() || began.Before(s.reach.failingSince) {
		s.reach.failingSince = began
	}
	s.reach.mu.Unlock()
}

// handingOver reports whether the replica holds no shards at now, for
// want of the game service. Once every call has failed for
// HandOverAfter, a probe confirms it (a game whose own deadline keeps
// failing, or one failure followed by silence, is no lost game service)
// and hands the shards over if it fails too; then probes go on until one
// is answered.
func (s *Service) handingOver(ctx, tctx context.Context, now time.Time) bool {
	s.reach.mu.Lock()
	if s.reach.drop {
		s.reach.drop = false
		since := s.failingSinceLocked()
		s.reach.mu.Unlock()
		n, err := s.dropShards(tctx)
		s.log.Error("every call to the game service failed, a probe too; handed the shards to the other replicas until it answers",
			"failing_for", now.Sub(since).Round(time.Millisecond), "shards", n, "release_err", err)
		s.notifyReach()
		s.reach.mu.Lock()
	}
	since := s.failingSinceLocked()
	due := !s.reach.handedOver && !since.IsZero() && now.Sub(since) >= s.cfg.HandOverAfter
	out := s.reach.handedOver
	probe := !s.reach.probing && (due || (out && now.Sub(s.reach.lastProbe) >= probeEvery))
	if probe {
		s.reach.probing, s.reach.lastProbe = true, now
	}
	s.reach.mu.Unlock()
	if probe {
		s.calls.Add(1)
		go s.probe(ctx)
	}
	return out
}

// probe asks the game service about a deadline of no game; a failure
// hands the shards over if they are not yet.
func (s *Service) probe(ctx context.Context) {
	defer s.calls.Done()
	_, err := s.askProbe(ctx)
	s.reach.mu.Lock()
	s.reach.probing = false
	if err != nil && ctx.Err() == nil && !s.reach.handedOver {
		s.reach.handedOver, s.reach.drop = true, true
	}
	s.reach.mu.Unlock()
	if err == nil {
		s.reached()
		return
	}
	s.log.Debug("game service probe", "err", err)
}

// askProbe sends the game service the deadline of no game, which it
// answers without writing anything, within probeTimeout.
func (s *Service) askProbe(ctx context.Context) (*gamev1.ExpireDeadlineResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, min(s.cfg.CallTimeout, probeTimeout))
	defer cancel()
	return s.games.ExpireDeadline(ctx, &gamev1.ExpireDeadlineRequest{GameId: probeGameID})
}

// notifyReach tells OnReach whether the replica reaches the game service
// as it stands when told, not as it stood when it changed: an answer that
// comes while the shards are being handed over changes it back, and its
// report must not be overtaken by the hand-over's, or the clock service
// would stay NOT_SERVING while it sweeps.
func (s *Service) notifyReach() {
	if s.cfg.OnReach == nil {
		return
	}
	s.reachReports.Lock()
	defer s.reachReports.Unlock()
	s.reach.mu.Lock()
	ok := !s.reach.handedOver
	s.reach.mu.Unlock()
	s.cfg.OnReach(ok)
}

func later(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}
