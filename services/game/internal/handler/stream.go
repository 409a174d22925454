package handler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/palacehq/palace/pkg/apierr"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/newest"
	"github.com/palacehq/palace/services/game/internal/hub"
	"github.com/palacehq/palace/services/game/internal/model"
	"github.com/palacehq/palace/services/game/internal/store"
)

// StreamEvents sends a snapshot when asked, then every event after the
// requested version exactly once and in order, then live events, with
// heartbeats. An event is sent only if its version is the next one, from
// the notification that carries it or else from the game's log, which is
// read whenever the stream cannot be sure it has seen everything (a gap
// in the versions, a slow reader, a subscription confirmed; see package
// hub), so nothing is dropped or repeated.
func (h *Handler) StreamEvents(req *gamev1.StreamEventsRequest, ss gamev1.GameService_StreamEventsServer) error {
	ctx := ss.Context()
	if err := checkAfterCommit(req); err != nil {
		return h.fail(ctx, err)
	}
	l, side, err := h.readableAfter(ctx, req.GetGameId(), req.GetSnapshot(), req.GetAfterVersion())
	if err != nil {
		return h.fail(ctx, err)
	}
	if req.GetAfterVersion() > l.State.Version {
		return h.fail(ctx, apierr.New(apierr.OutOfRange, "after_version %d is ahead of the game (version %d)", req.GetAfterVersion(), l.State.Version))
	}
	// Spectators have a share of the streams, so that however many of
	// them come, the players' own streams find room; a seat holds a few,
	// its newest. A spectator takes its share's place first: one refused
	// for it never holds, even for a moment, a place the seats may need.
	var replaced <-chan struct{}
	if side == nil {
		select {
		case h.spectators <- struct{}{}:
			defer func() { <-h.spectators }()
		default:
			return h.fail(ctx, apierr.New(apierr.ResourceExhausted, "too many spectator streams on this server; retry later (the players' own streams have room of their own)"))
		}
		if err := h.takeStream(ctx, false); err != nil {
			return h.fail(ctx, err)
		}
		defer func() { <-h.streams }()
	} else {
		ended, evicted, remove, err := h.seatLimit.Add(ctx, seatKey{l.State.ID, *side})
		if errors.Is(err, newest.ErrLeaving) {
			return h.fail(ctx, apierr.New(apierr.ResourceExhausted, "this seat's %d streams that newer ones replaced on this server have not ended, as their client reads none of them: close the streams it does not read, then retry", h.cfg.MaxSeatStreams))
		}
		if err != nil {
			return h.fail(ctx, err)
		}
		defer remove()
		replaced = ended
		if err := h.takeStream(ctx, evicted); err != nil {
			return h.fail(ctx, err)
		}
		defer func() { <-h.streams }()
	}
	h.metrics.streams.Add(ctx, 1)
	defer h.metrics.streams.Add(context.WithoutCancel(ctx), -1)

	// Subscribe before reading, so nothing committed from here on can
	// slip between the catch-up read and the live wait.
	sub, err := h.hub.Subscribe(ctx, l.State.ID)
	if err != nil {
		return h.fail(ctx, err)
	}
	defer h.hub.Unsubscribe(context.WithoutCancel(ctx), sub)

	next := req.GetAfterVersion() + 1
	if req.GetSnapshot() {
		if err := ss.Send(&gamev1.StreamEventsResponse{Message: &gamev1.StreamEventsResponse_Snapshot{Snapshot: model.View(h.judged(l.State, l.Now), nil, l.Now)}}); err != nil {
			return err
		}
		next = l.State.Version + 1
	}
	// sentStamp is the stamp of the commit that made the last event sent,
	// or that made the event the stream resumed after: "" when not known.
	// A client that resumes without naming it has the game as Redis holds
	// it, as far as anyone can tell: the log's event at that version, which
	// the first read brings, names it then. Not the state read here, which
	// may be this process's memory of a commit that Redis lost.
	var sentStamp string
	switch {
	case req.GetSnapshot():
		sentStamp = l.State.LogStamp
	case req.GetAfterCommit() != "":
		sentStamp = req.GetAfterCommit()
	}
	// diverged tells whether e, at the stream's version or the next, shows
	// a history other than the one the stream sent: Redis lost commits
	// that the stream had sent (a restart from a file that lacks them, a
	// failover), and the game went on from before them. The stream ends
	// rather than run on into events that follow what its client never
	// had, or pass over them as sent.
	diverged := func(e hub.Event) bool {
		if sentStamp == "" || e.Stamp == "" {
			return false
		}
		switch e.Version {
		case next:
			return e.After != "" && e.After != sentStamp
		case next - 1:
			return e.Stamp != sentStamp
		}
		return false
	}
	rewritten := func(v uint64) error {
		return h.fail(ctx, apierr.New(apierr.OutOfRange, "game %s no longer holds version %d as this stream's client had it (its commit): Redis lost its latest writes, and the game went on from before them; read the game anew (a stream with a snapshot)", l.State.ID, v))
	}
	if l.State.Status.Finished() && next > l.State.Version {
		// The game's last event is behind the client already: nothing will
		// ever follow, and the stream is complete, if the client has that
		// event (a finished game is read from Redis, never cached).
		if sentStamp != "" && l.State.LogStamp != "" && sentStamp != l.State.LogStamp {
			return rewritten(l.State.Version)
		}
		return nil
	}
	ended := false
	// A seat's stream records its player connected once its first read
	// of the log found the history its client had: one refused then (a
	// commit Redis lost, OUT_OF_RANGE) changes nothing, as no refusal does.
	// Recorded beside the stream, as its reads are, so that a Redis slow
	// to answer delays no heartbeat; the closing waits for it, so that the
	// two are counted in order, and so does the forgetting of a stream
	// that delivered its game's end, though not its client: once the game
	// is over, the record no longer matters, and the stream is complete.
	// recorded is nil until then.
	var recorded chan struct{}
	connected := func() {
		if side == nil || l.State.Status.Finished() || recorded != nil {
			return
		}
		recorded = make(chan struct{})
		go func() {
			defer close(recorded)
			h.presence.opened(ctx, l.State.ID, *side)
		}()
	}
	defer func() {
		if recorded == nil {
			return
		}
		if !ended {
			<-recorded
			h.presence.closed(context.WithoutCancel(ctx), l.State.ID, *side)
			return
		}
		// After the game's end presence no longer changes: there is
		// nothing to record, only the seat to forget.
		forget := func() {
			<-recorded
			if h.presence.ended(l.State.ID, *side) {
				h.unlist(context.WithoutCancel(ctx), l.State.ID, *side)
			}
		}
		if !h.forgetLater(forget) {
			forget()
		}
	}()

	// A heartbeat follows an interval of silence, so a client never
	// waits longer than --heartbeat for a message of a live stream. Each
	// interval is up to a quarter shorter, at random: streams opened
	// together (thousands of clients reconnecting after a rollout) would
	// otherwise beat in step for ever, and each beat reads the game from
	// Redis, all at the same instant.
	beat := time.NewTimer(h.beatInterval())
	defer beat.Stop()
	heartbeat := func() error {
		hb := &gamev1.Heartbeat{ServerTime: timestamppb.New(h.now()), Version: next - 1}
		return ss.Send(&gamev1.StreamEventsResponse{Message: &gamev1.StreamEventsResponse_Heartbeat{Heartbeat: hb}})
	}
	// opened is set once the stream has sent something: one with nothing
	// to send at first (resumed at the game's version) sends a heartbeat
	// at once, so that its client knows it is live now, not a heartbeat
	// interval later. Headers alone would not do: over Connect they leave
	// with the first message.
	opened := req.GetSnapshot()
	send := func(e hub.Event) (done bool, err error) {
		if diverged(e) {
			return true, rewritten(e.Version - 1)
		}
		// Sent as encoded once for every stream of the game in this
		// process (hub.Event), not marshalled again for each one.
		if err := ss.SendMsg(e.Msg); err != nil {
			return true, err
		}
		next++
		sentStamp = e.Stamp
		opened = true
		beat.Reset(h.beatInterval())
		// The game's last event completes the stream.
		ended = e.Ended
		return ended, nil
	}
	// checked brings the game's version, read beside the stream at each
	// heartbeat (see below); checking is set while a read is under way.
	checked := make(chan versionCheck, 1)
	checking := false
	read := true
	// A read that Redis could not answer is tried again after a back-off:
	// it fails while Redis is away, and for a moment once it is back
	// (its data loading, this process' connections backing off), and none
	// of that is the client's fault or a reason to make every stream of
	// the process reconnect at once. Heartbeats go on meanwhile.
	var retry <-chan time.Time
	var backoff time.Duration
	// Reads of the log run beside the stream, as the version checks do,
	// so that a Redis slow to answer delays no heartbeat; reading is set
	// while one is under way, and read asks for another once it is done.
	reads := make(chan eventsRead, 1)
	reading := false
	// ahead is the game's version as the last check found it, when that
	// was past the stream: its log must hold what the stream lacks.
	var ahead uint64
	for {
		if read && !reading {
			read, reading = false, true
			after, checkedAt := next-1, ahead
			// From the version sent last: a read after a subscription lost
			// for a while (Redis restarting) is where the stream learns that
			// the game went on from before it, and a stream resumed without
			// a commit learns the one it resumed after.
			from, count := after, int64(streamBatch)
			if after > 0 {
				from, count = after-1, count+1
			}
			go func() {
				raws, err := h.store.Events(ctx, l.State.ID, from, count)
				reads <- eventsRead{raws: raws, err: err, after: after, ahead: checkedAt}
			}()
		}
		if !opened && !reading {
			if err := heartbeat(); err != nil {
				return err
			}
			opened = true
		}
		select {
		case r := <-reads:
			reading = false
			if r.err != nil && apierr.Transient(r.err) && ctx.Err() == nil {
				backoff = min(max(2*backoff, minReadBackoff), maxReadBackoff)
				h.log.DebugContext(ctx, "read events: retrying", "game", l.State.ID, "err", r.err, "retry_in", backoff)
				retry = time.After(backoff)
				continue
			}
			if r.err != nil {
				return h.fail(ctx, r.err)
			}
			backoff = 0
			evs, err := streamEvents(r.raws)
			if err != nil {
				return h.fail(ctx, fmt.Errorf("game %s: %w", l.State.ID, err))
			}
			fresh := 0
			for _, e := range evs {
				if e.Version > r.after {
					fresh++
				}
			}
			if fresh == 0 && r.ahead > r.after {
				if err := h.logLost(ctx, l.State.ID, r.after); err != nil {
					return h.fail(ctx, err)
				}
			}
			for _, e := range evs {
				if sentStamp == "" && e.Version == next-1 {
					sentStamp = e.Stamp
				}
				if e.Version < next {
					if diverged(e) {
						return rewritten(e.Version)
					}
					continue // sent meanwhile, from a notification
				}
				if e.Version != next {
					// Never skip. The log lacks version next but holds a
					// later one: commits write it in order, so only a
					// damaged log does, and reading it again would only
					// spin on the same answer.
					return h.fail(ctx, fmt.Errorf("game %s: its event log lacks version %d but holds %d: the log is damaged (does Redis evict keys? it needs maxmemory-policy noeviction)", l.State.ID, next, e.Version))
				}
				if done, err := send(e); done || err != nil {
					return err
				}
			}
			connected()
			// A full batch may have more behind it.
			read = read || fresh == streamBatch
		case <-ctx.Done():
			// Not nil: an OK status would tell the client that the stream
			// is complete, which only the game's end makes it.
			return h.fail(ctx, ctx.Err())
		case <-replaced:
			return h.fail(ctx, apierr.New(apierr.ResourceExhausted, "this seat opened another event stream on this server, over its limit of %d open at once: its oldest, this one, is closed; read the newest, and do not open this one again", h.cfg.MaxSeatStreams).WithInfo(newest.ReplacedReason, nil))
		case evs := <-sub.Events:
			for _, e := range evs {
				switch {
				case diverged(e) && e.Version < next:
					return rewritten(e.Version)
				case e.Version < next:
					continue // already sent (read from the log)
				case e.Version > next:
					read = true // something was missed: fetch it from the log
				default:
					if done, err := send(e); done || err != nil {
						return err
					}
					continue
				}
				break
			}
		case <-sub.C:
			read = true
		case <-retry:
			read, retry = true, nil
		case c := <-checked:
			checking = false
			switch {
			case errors.Is(c.err, store.ErrNotFound):
				return h.fail(ctx, apierr.New(apierr.NotFound, "game %s not found: it expired", l.State.ID))
			case c.err == nil && c.committed < c.sent:
				// Behind what this stream had sent before the read: what
				// it followed is gone, and what follows would be another
				// game's. Compared with then, not now: a commit sent
				// meanwhile is no sign of anything.
				return h.fail(ctx, apierr.New(apierr.OutOfRange, "game %s is at version %d, behind the %d this stream sent: it expired and was created again under its id, or Redis lost its latest writes; read the game anew (a stream with a snapshot)", l.State.ID, c.committed, c.sent))
			case c.err == nil && c.committed == c.sent && c.sentStamp != "" && c.stamp != "" && c.stamp != c.sentStamp:
				// The game's head names another commit than the one sent.
				// The log's event at the version sent decides (diverged):
				// a writer that does not keep the head's field (a release
				// before it) leaves it stale.
				read = true
			case c.err == nil && c.version >= next:
				read, ahead = true, c.version
			}
			if c.err == nil && c.committed > c.version {
				// A commit that its replicas have not confirmed shows to no
				// stream. The process that made it confirms it once they
				// have; should it have died meanwhile, nobody else would,
				// and the move would stay unseen while the opponent's clock
				// ran. Confirming it again is harmless: it waits for the
				// replicas as the first did.
				h.confirmLater(l.State.ID)
			}
		case <-beat.C:
			beat.Reset(h.beatInterval())
			if err := heartbeat(); err != nil {
				return err
			}
			// A whole interval of silence: look at the game itself, which
			// may have expired (the stream then ends, as a new one would
			// not start) or moved on without a word reaching this stream.
			// The read runs beside the stream, so that a Redis slow to
			// answer delays no heartbeat; one out of reach is no reason to
			// drop the client: the stream lives on, as it does between
			// notifications, and catches up once its subscription is back.
			if !checking {
				checking = true
				sent, stamp := next-1, sentStamp
				go func() {
					head, err := h.store.Versions(ctx, l.State.ID)
					checked <- versionCheck{version: head.Shown, committed: head.Committed, stamp: head.LogStamp,
						sent: sent, sentStamp: stamp, err: err}
				}()
			}
		}
	}
}

// maxCommitBytes bounds StreamEventsRequest.after_commit: a commit's name
// is a few bytes (model.Seal), and the room left is for a change of form.
const maxCommitBytes = 32

// checkAfterCommit refuses an after_commit that names no commit this
// service could have sent, before Redis is asked anything.
func checkAfterCommit(req *gamev1.StreamEventsRequest) error {
	c := req.GetAfterCommit()
	switch {
	case c == "":
		return nil
	case req.GetAfterVersion() == 0 && !req.GetSnapshot():
		return apierr.New(apierr.Invalid, "after_commit names the commit of the event at after_version, and after_version is 0: there is no event before the first; send after_commit with the after_version of the same event")
	}
	return checkID("after_commit", c, maxCommitBytes)
}

// takeStream takes one of the process's places, or says it is full (see
// newest.TakePlace).
func (h *Handler) takeStream(ctx context.Context, replacing bool) error {
	err := newest.TakePlace(ctx, h.streams, replacing)
	if errors.Is(err, newest.ErrFull) {
		return apierr.New(apierr.ResourceExhausted, "too many event streams on this server; retry later")
	}
	return err
}

// eventsRead is what one read of a game's log brought.
type eventsRead struct {
	raws [][]byte
	err  error
	// after is the version the read began after; ahead, when greater,
	// the game's version as a check found it before the read.
	after, ahead uint64
}

// The back-off of a stream's reads of the game's log while Redis cannot
// answer them.
const (
	minReadBackoff = 50 * time.Millisecond
	maxReadBackoff = 2 * time.Second
	// streamBatch is how many events one read of a game's log returns: a
	// stream far behind catches up in several reads, sending as it goes.
	streamBatch = 100
)

// logLost tells why game id's log held nothing after version after when
// a check had found the game past it: the game expired meanwhile
// (NotFound), or its log was lost while its state stayed (a Redis that
// evicts keys), which no read will mend. Nil when neither can be told.
// The log is read again after the version: Redis may have lost the
// commit the check saw and the game gone on since the stream's read, and
// a commit writes its version and its events at once, so a log read after
// holds the version read before it unless the log is lost.
func (h *Handler) logLost(ctx context.Context, id string, after uint64) error {
	v, err := h.store.Version(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apierr.New(apierr.NotFound, "game %s not found: it expired", id)
	case err != nil || v <= after:
		return nil
	}
	if evs, err := h.store.Events(ctx, id, after, 1); err != nil || len(evs) > 0 {
		return nil
	}
	return fmt.Errorf("game %s is at version %d, but its event log holds nothing after version %d: the log was lost (does Redis evict keys? it needs maxmemory-policy noeviction)", id, v, after)
}

// beatInterval is the silence after which a stream sends a heartbeat:
// --heartbeat less up to a quarter of it, at random.
func (h *Handler) beatInterval() time.Duration {
	return h.cfg.Heartbeat - rand.N(h.cfg.Heartbeat/4+1)
}

// versionCheck is a game's version as a stream's heartbeat read it:
// version as the stream may show it (confirmed by replicas, where commits
// wait for them), committed its latest commit's, stamp that of the last
// commit that logged events; sent is the version the stream had reached
// when the read began, sentStamp the stamp of the commit that made it.
type versionCheck struct {
	version, committed, sent uint64
	stamp, sentStamp         string
	err                      error
}
