// Package handler implements palace.game.v1.GameService: validation and
// authorisation at the edge, then the model's commands committed through
// the store with compare-and-set, idempotency and the deadline index.
package handler

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/protobuf/proto"

	"github.com/palacehq/palace/pkg/aijobs"
	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/auth"
	"github.com/palacehq/palace/pkg/clock"
	"github.com/palacehq/palace/pkg/deadline"
	"github.com/palacehq/palace/pkg/displayname"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/ident"
	"github.com/palacehq/palace/pkg/newest"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/pkg/rulespb"
	"github.com/palacehq/palace/pkg/server"
	"github.com/palacehq/palace/pkg/textcut"
	"github.com/palacehq/palace/services/game/internal/hub"
	"github.com/palacehq/palace/services/game/internal/model"
	"github.com/palacehq/palace/services/game/internal/store"
)

// Limits on requests, checked before anything touches Redis.
const (
	MaxIDBytes        = 64
	MaxRequestIDBytes = 128
	MaxPlayerIDBytes  = 128
	MaxFENBytes       = 256
	MaxMoveBytes      = 8
	// The ranges of a game's setup and first-move times, whether a
	// request sets them or the service's defaults do.
	MinSetupTime     = time.Second
	MaxSetupTime     = time.Hour
	MinFirstMoveTime = time.Second
	MaxFirstMoveTime = 24 * time.Hour
	// commitAttempts bounds retries after losing a compare-and-set to
	// another writer of the same game.
	commitAttempts = 16
	// cacheIdle is how long a game's cached state outlives its last
	// commit here: longer than a player's turn in any usual time control,
	// so that a game in play keeps its entry.
	cacheIdle = 10 * time.Minute
)

// presenceStopWait bounds how long a stopping process leaves the closings
// it holds back to come due (presence.flush): within the services' close
// at stop (5 s), with room for the last writes after it.
const presenceStopWait = 3 * time.Second

// DefaultMaxSeatStreams is how many streams one seat may hold in one
// process: a player on a phone, a tablet and a browser at once, and the
// streams a reconnecting client left behind.
const DefaultMaxSeatStreams = 8

// Config tunes the handler.
type Config struct {
	SeatTTL       time.Duration
	SetupTime     time.Duration
	FirstMoveTime time.Duration
	Lag           clock.LagPolicy
	Heartbeat     time.Duration
	// MaxStreams bounds the event streams this process serves at once
	// (default 50000): each holds a goroutine and its buffers.
	MaxStreams int
	// MaxSpectatorStreams bounds the streams without a seat among them
	// (default three quarters of MaxStreams, at least one), so that
	// spectators cannot take the players' own streams' room.
	MaxSpectatorStreams int
	// MaxSeatStreams bounds the streams of one seat in this process
	// (default 8); a newer one ends the oldest.
	MaxSeatStreams int
	// PresenceGrace holds back a seat stream's disconnection, so that a
	// reconnection within it records nothing (0: record at once).
	PresenceGrace time.Duration
	// PresenceLease is how long the seats this process holds outlive its
	// last renewal, should it die (default 15 s).
	PresenceLease time.Duration
	// AIJobs, when set, receives a job whenever an AI seat has to act.
	AIJobs *aijobs.Queue
	// ServiceKeys verify the service credentials that internal calls
	// (CreateGame, IssueSeatCredentials, ExpireDeadline, Probe) must carry.
	ServiceKeys *auth.Keyring
}

// Handler serves the game service.
type Handler struct {
	gamev1.UnimplementedGameServiceServer
	log     *slog.Logger
	cfg     Config
	store   *store.Store
	index   *deadline.Index
	hub     *hub.Hub
	ring    *auth.Keyring
	metrics metrics
	streams chan struct{}
	// spectators holds a place per stream without a seat.
	spectators chan struct{}
	seatLimit  *newest.Limit[seatKey]
	cache      *stateCache
	locks      *gameLocks
	presence   *presence
	// forgetting runs the seat forgetting of streams that delivered their
	// game's end (forgetLater), which Close waits for; closing is set
	// once it does, under forgetMu.
	forgetting sync.WaitGroup
	forgetMu   sync.Mutex
	closing    bool
	// proc names this process where it holds seats (see leases.go).
	proc      string
	stopLease context.CancelFunc
	leaseDone chan struct{}
	// renewDone closes when the lease is no longer renewed (keepRenewing);
	// rehold asks keepLease to hold this process's seats again.
	renewDone chan struct{}
	rehold    atomic.Bool
	// renewUnsure: a renewal failed, and may have run all the same.
	renewUnsure atomic.Bool
	// renewSoon asks keepRenewing to renew now: a broken contact with
	// Redis came back, and what nobody served meanwhile is to be recorded
	// before another process, starting, judges a turn without it.
	renewSoon chan struct{}
	// unconfirmed holds games to confirm without their clients (see
	// unconfirmed.go); confirmDone closes when that stops.
	unconfirmed unconfirmed
	confirmDone chan struct{}
	// retry holds the changes of seats' holdings that failed to record.
	retryMu sync.Mutex
	retry   map[seatKey]int
	// verified remembers checked seat credentials: clients send the same
	// one with every command.
	verified *auth.Verified
	// services remembers checked service credentials.
	services *auth.Verified
	// redisTime anchors now() to Redis TIME, so a command run on a cached
	// state uses the same time base as one that read Redis (and as the
	// sweeper), whatever this host's clock says.
	redisTime atomic.Pointer[timeAnchor]
	// outages are the spans in which this process could not reach Redis
	// (see outages.go); watchDone closes when it stops watching.
	outages outages
	// epoch is the epoch of the service's data in Redis at this process's
	// last beat, nil before its first (beat); beatDone closes when it
	// stops beating.
	epoch     atomic.Pointer[string]
	beatDone  chan struct{}
	watchDone chan struct{}
	// contact is this process's unbroken contact with Redis, as its
	// pings see it (outages.go).
	contact contact
	// started is when this process could first serve, in Unix ms.
	started int64
	// silencesSeen is the end of the last silence taken as an outage;
	// only renew, run by one goroutine at a time, reads and sets it.
	silencesSeen int64
}

// timeAnchor is Redis TIME as read at a local monotonic instant.
type timeAnchor struct {
	redis time.Time
	local time.Time
}

var _ gamev1.GameServiceServer = (*Handler)(nil)

type metrics struct {
	commits   metric.Int64Counter
	conflicts metric.Int64Counter
	latency   metric.Float64Histogram
	streams   metric.Int64UpDownCounter
	// outages counts the Redis outages this process saw end, and
	// excused the turns it excused them.
	outages metric.Int64Counter
	excused metric.Int64Counter
	// silences counts the spans in which no process held a lease.
	silences metric.Int64Counter
}

// New returns a handler.
func New(ctx context.Context, log *slog.Logger, cfg Config, st *store.Store, idx *deadline.Index, h *hub.Hub, ring *auth.Keyring, meter metric.Meter) (*Handler, error) {
	var m metrics
	var errs []error
	var err error
	m.commits, err = meter.Int64Counter("palace_game_commits_total", metric.WithDescription("game commands committed"))
	errs = append(errs, err)
	m.conflicts, err = meter.Int64Counter("palace_game_conflicts_total", metric.WithDescription("commits that lost a compare-and-set and were retried or refused"))
	errs = append(errs, err)
	m.latency, err = meter.Float64Histogram("palace_game_command_seconds", metric.WithDescription("game command latency"), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1))
	errs = append(errs, err)
	m.streams, err = meter.Int64UpDownCounter("palace_game_streams", metric.WithDescription("open event streams"))
	errs = append(errs, err)
	m.outages, err = meter.Int64Counter("palace_game_redis_outages_total", metric.WithDescription("spans in which this process could not reach Redis, counted as they end"))
	errs = append(errs, err)
	m.silences, err = meter.Int64Counter("palace_game_silences_total", metric.WithDescription("spans in which no game process held a lease (every one stopped, or cut off from Redis), counted by the process that found one; excused as outages"))
	errs = append(errs, err)
	m.excused, err = meter.Int64Counter("palace_game_turns_excused_total", metric.WithDescription("turns, and waits for a formation or a first move, excused the time of a Redis outage"))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("game metrics: %w", err)
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = 50000
	}
	if cfg.MaxSpectatorStreams <= 0 {
		cfg.MaxSpectatorStreams = max(cfg.MaxStreams*3/4, 1)
	}
	if cfg.MaxSeatStreams <= 0 {
		cfg.MaxSeatStreams = DefaultMaxSeatStreams
	}
	hd := &Handler{log: log, cfg: cfg, store: st, index: idx, hub: h, ring: ring, metrics: m, streams: make(chan struct{}, cfg.MaxStreams),
		spectators: make(chan struct{}, cfg.MaxSpectatorStreams), seatLimit: newest.New[seatKey](cfg.MaxSeatStreams),
		cache: newStateCache(20000, cacheIdle, time.Now), locks: newGameLocks()}
	if cfg.PresenceLease <= 0 {
		cfg.PresenceLease = defaultPresenceLease
	}
	hd.cfg = cfg
	hd.presence = newPresence(cfg.PresenceGrace, hd.connect)
	hd.verified = auth.NewVerified(ring, 1<<16)
	if cfg.ServiceKeys == nil {
		return nil, errors.New("game handler: no service keys to verify internal calls with")
	}
	hd.services = auth.NewVerified(cfg.ServiceKeys, 1024)
	hd.proc, hd.retry, hd.renewSoon = newProcessID(), map[seatKey]int{}, make(chan struct{}, 1)
	// Commands after CreateGame run on the cached state, with no read of
	// Redis to learn its time from: learn it before serving any.
	hd.syncTime(ctx)
	// This process could serve from its start on, not before.
	hd.started = hd.now().UnixMilli()
	hd.beat(ctx)
	// And the silences of the service (every process stopped) before the
	// first command, which may judge a turn that one took.
	hd.contact.answered(hd.started, hd.started)
	for try := 0; try < 5 && !hd.renew(ctx); try++ {
		time.Sleep(200 * time.Millisecond)
	}
	leaseCtx, stop := context.WithCancel(context.Background())
	hd.stopLease, hd.leaseDone = stop, make(chan struct{})
	go func() {
		defer close(hd.leaseDone)
		hd.keepLease(leaseCtx)
	}()
	hd.renewDone = make(chan struct{})
	go func() {
		defer close(hd.renewDone)
		hd.keepRenewing(leaseCtx)
	}()
	hd.watchDone, hd.beatDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(hd.watchDone)
		hd.watchRedis(leaseCtx)
	}()
	go func() {
		defer close(hd.beatDone)
		hd.keepBeating(leaseCtx)
	}()
	hd.unconfirmed.games, hd.confirmDone = map[string]struct{}{}, make(chan struct{})
	go func() {
		defer close(hd.confirmDone)
		if st.Waits() {
			hd.keepConfirming(leaseCtx)
		}
	}()
	return hd, nil
}

// Close records the disconnections still held back and gives up this
// process's lease; call it after the server has stopped and before Redis
// closes.
func (h *Handler) Close(ctx context.Context) {
	h.stopLease()
	<-h.leaseDone
	<-h.renewDone
	<-h.watchDone
	<-h.beatDone
	<-h.confirmDone
	// A stream the server's stop did not wait for (cut off by its
	// timeout) may still deliver its game's end: it forgets its seat
	// itself from now on.
	h.forgetMu.Lock()
	h.closing = true
	h.forgetMu.Unlock()
	select {
	case <-doneOf(&h.forgetting):
	case <-ctx.Done():
	}
	h.presence.flush(ctx, min(h.cfg.PresenceGrace, presenceStopWait))
	// Every closing recorded, nothing is left to release; otherwise the
	// lease is left run out, for another process to finish.
	// Should this be the last process to stop, the silence that follows
	// begins now.
	// A last beat first, with the breaks no renewal has told: the stop
	// dates this process's last beat (Gone), and it must not vouch for
	// them.
	stop := h.now()
	if err := h.store.Alive(ctx, h.proc, time.UnixMilli(h.started), h.contact.untoldAt(stop)); err != nil {
		h.log.WarnContext(ctx, "presence lease", "err", err)
	}
	if err := h.store.Stopped(ctx, h.proc, stop); err != nil {
		h.log.WarnContext(ctx, "presence lease", "err", err)
	}
	if err := h.store.Gone(ctx, h.proc, stop); err != nil {
		h.log.WarnContext(ctx, "presence lease", "err", err)
	}
	held, err := h.store.Held(ctx, h.proc)
	if err == nil && len(held) == 0 {
		err = h.store.Forget(ctx, h.proc)
	} else if err == nil {
		err = h.store.EndLease(ctx, h.proc)
	}
	if err != nil {
		h.log.WarnContext(ctx, "presence lease", "err", err)
	}
}

// forgetLater runs forget beside the caller, for Close to wait for, and
// reports whether it does: once Close has begun it does not, and the
// caller runs it.
func (h *Handler) forgetLater(forget func()) bool {
	h.forgetMu.Lock()
	defer h.forgetMu.Unlock()
	if h.closing {
		return false
	}
	h.forgetting.Go(forget)
	return true
}

func (h *Handler) fail(ctx context.Context, err error) error { return apierr.ToStatus(ctx, h.log, err) }

// checkID validates a client-chosen id that becomes part of Redis keys.
func checkID(field, id string, limit int) error { return ident.Check(field, id, limit, "") }

// errNotASeat marks a credential that holds no seat of the game asked
// about: another game's seat, or a credential of another kind (a
// player's, a service's).
var errNotASeat = errors.New("not a seat of this game")

// credential reads the seat credential of game id from the metadata: ok is
// false without one. A credential that is valid but not for a seat of the
// game gives an error that is errNotASeat.
func (h *Handler) credential(ctx context.Context, id string, now time.Time) (rules.Side, bool, error) {
	tok, ok, err := auth.Bearer(ctx, "seat credential")
	if !ok || err != nil {
		return 0, false, err
	}
	c, err := h.verified.Verify(tok, now)
	// A credential of another kind (a player's, which apps send with every
	// call) holds no seat: it may still watch a public game, as no
	// credential may. Answered alike whether or not it verifies here: a
	// deployment may sign players' and seats' credentials with one key.
	if hint := auth.KindHint(tok, auth.KindSeat); hint != "" {
		e := apierr.New(apierr.Unauthenticated, "seat credential: %s", hint)
		e.Err = errNotASeat
		return 0, false, e
	}
	if err != nil {
		dead := errors.Is(err, auth.ErrExpired) || errors.Is(err, auth.ErrUnknownKey)
		if uc, ok := auth.Unverified(tok); dead && ok && uc.Kind == auth.KindSeat && uc.Game != id {
			// Another game's seat, run out or signed with a key removed:
			// no seat of this game either way, so refused as a live one of
			// another game is, not sent for a new credential of a seat of
			// this game that it never held. Its claims are not verified,
			// so they only ever take away.
			e := apierr.New(apierr.PermissionDenied, "this credential is not for a seat of game %s", id)
			e.Err = errNotASeat
			return 0, false, e
		}
		e := auth.Refused("seat credential", err)
		if dead {
			// Said where the answer's reason is, so that a client developer
			// reading the message learns the way out too.
			e.Msg += ": the seat is still held; get a new credential for it (players: matchmaking's ResumeGame; services: IssueSeatCredentials)"
		}
		return 0, false, e
	}
	if c.Kind != auth.KindSeat || c.Game != id {
		e := apierr.New(apierr.PermissionDenied, "this credential is not for a seat of game %s", id)
		e.Err = errNotASeat
		return 0, false, e
	}
	side, err := rules.ParseSide(c.Side)
	if err != nil {
		return 0, false, apierr.New(apierr.Unauthenticated, "seat credential: %v", err)
	}
	return side, true, nil
}

// internal admits a call that only Palace services and operators may
// make: creating games and issuing credentials (each hands out seats),
// reading games in bulk, expiring deadlines and the load test's probe. Players reach the game
// service directly, so these calls carry a service credential.
func (h *Handler) internal(ctx context.Context, rpc string) error {
	return auth.RequireService(ctx, h.services, rpc)
}

func (h *Handler) seat(ctx context.Context, id string) (rules.Side, error) {
	side, ok, err := h.credential(ctx, id, time.Now())
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, apierr.New(apierr.Unauthenticated, "a seat credential is required: send \"authorization: Bearer <token>\"")
	}
	return side, nil
}

type command struct {
	id        string
	requestID string
	// seated: a seat's command, side's. Each seat's request ids are its
	// own: the two players' apps may use the same ones (counters, say)
	// without refusing each other's commands.
	seated bool
	side   rules.Side
	// scoped: the answer is remembered under the seat's own field, because
	// the other seat's command took the request id's plain one first.
	scoped bool
	// label says who asked what ("the first seat's move h3e3"); a retry
	// repeats it exactly, and the answer is remembered under it.
	label    string
	expected uint64
	run      func(st *model.State, now time.Time) (model.Change, error)
	// respond builds the answer from the committed change.
	respond func(ch model.Change, now time.Time) proto.Message
	// decode reads a remembered answer.
	decode func([]byte) (proto.Message, error)
}

// exec loads, runs and commits a command, retrying lost compare-and-sets,
// and returns the (possibly remembered) answer.
func (h *Handler) exec(ctx context.Context, name string, c command) (_ proto.Message, err error) {
	start, begun := time.Now(), h.now()
	defer func() {
		h.metrics.latency.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attribute.String("command", name)))
		h.failedFor(ctx, begun, err)
	}()
	unlock, err := h.locks.lock(ctx, c.id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if raw, stamp := h.cache.answer(c.id, c.field()); raw != nil {
		// Redis may have lost the commit since (a restart from a file that
		// lacks it, a failover without --redis-wait-replicas): its answer
		// stands only while the game is at that commit. Otherwise the game
		// moved on, and the paths below find the answer stored, or run the
		// command again if it is not.
		at, err := h.store.Stamp(ctx, c.id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if at == stamp {
			resp, err := c.remembered(raw)
			if !errors.Is(err, errOtherSeatsID) {
				return resp, err
			}
			c.scoped = true
		} else {
			h.cache.drop(c.id)
		}
	}
	// Fast path: run on the state this process last committed. Its commit
	// checks the version and the request id, so it is exactly as safe as
	// the slow path; anything unusual (a refusal, a conflict) takes the
	// slow path, which also answers retries of finished requests. A
	// command that writes ahead of its commit (an AI job, a deadline) takes
	// it only when its request id is known to be new in the game: the
	// commit that would refuse an id used before comes after those writes.
	// A command is judged at the instant it was first run: a compare-and-set
	// lost to another commit (a draw offer, a seat connecting, a period
	// announced) must not charge its player the time of the reload, which
	// may put a move that arrived in time past its deadline. A commit that
	// ended the game (the flag) still refuses it, since the reload sees it.
	var judgedAt time.Time
	judge := func(now time.Time) time.Time {
		if judgedAt.IsZero() || now.Before(judgedAt) {
			judgedAt = now
		}
		return judgedAt
	}
	cached := h.cache.get(c.id)
	if cached != nil && (c.expected == 0 || cached.Current(c.expected)) {
		now := judge(h.now())
		// A refusal that changes the game (a deadline passed) takes the
		// slow path too: it may be the retry of a request answered before
		// the deadline, whose first answer only the slow path looks up.
		if ch, err := h.runExcused(c, cached, now); err == nil && ch.Reply == nil &&
			(!h.writesAhead(cached, ch.State) || h.cache.unused(c.id, c.field())) {
			resp, err := h.commit(ctx, cached, ch, c, now, nil)
			switch {
			case errors.Is(err, errOtherSeatsID):
				c.scoped = true
			case errors.Is(err, errConflict):
				h.metrics.conflicts.Add(ctx, 1)
				h.cache.drop(c.id)
			default:
				return resp, err
			}
		}
	}
	for attempt := range commitAttempts {
		if err := backoff(ctx, attempt); err != nil {
			return nil, err
		}
		// The game's request ids are read with it for the fast path of
		// the commands to come, if they may write ahead.
		l, err := h.loadForCommand(ctx, c.id, c.field(), cached == nil || mayWriteAhead(cached))
		if errors.Is(err, store.ErrNotFound) {
			return nil, apierr.New(apierr.NotFound, "game %s not found", c.id)
		}
		if err != nil {
			return nil, err
		}
		if l.Previous != nil {
			// Its commit may have failed to reach the replicas asked for:
			// answer only once they have it.
			if _, err := h.confirm(ctx, c.id); err != nil {
				return nil, err
			}
			resp, err := c.remembered(l.Previous)
			if errors.Is(err, errOtherSeatsID) {
				// Read again under the seat's own field.
				c.scoped = true
				continue
			}
			return resp, err
		}
		if c.expected != 0 && !l.State.Current(c.expected) {
			return nil, staleVersion(c.expected, l.State.Version)
		}
		now := judge(l.Now)
		if now.UnixMilli() < l.State.TurnStartMs {
			// The reload crossed the start of a turn (the other side's move
			// landed first): the first instant lies before the game the
			// command now acts on.
			now = l.Now
		}
		ch, err := h.runExcused(c, l.State, now)
		if err != nil {
			return nil, err
		}
		resp, err := h.commit(ctx, l.State, ch, c, now, l.RequestIDs)
		if errors.Is(err, errOtherSeatsID) {
			// The other seat took the plain field meanwhile.
			c.scoped = true
			continue
		}
		if errors.Is(err, errConflict) {
			// Read again: whether the expected version is still current
			// depends on what the other commit changed.
			h.metrics.conflicts.Add(ctx, 1)
			continue
		}
		return resp, err
	}
	return nil, apierr.New(apierr.Unavailable, "game %s is too busy: retry with the same request_id", c.id)
}

// NewerFormatReason is the ErrorInfo reason of the Unavailable answered
// for a game that a newer version of the service stored (during a rolling
// upgrade): retry, on another replica if the client can choose.
const NewerFormatReason = "NEWER_FORMAT"

// writable refuses a game stored in a format this build would damage,
// before anything is decided on what it cannot read in it.
func writable(st *model.State) error {
	if err := store.Writable(st); err != nil {
		return newerFormat(st.ID, err)
	}
	return nil
}

func newerFormat(id string, err error) error {
	return (&apierr.Error{Code: apierr.Unavailable, Err: err,
		Msg: fmt.Sprintf("game %s was last written by a newer version of the game service, which this server must not decide on or overwrite (a rolling upgrade is under way): retry with the same request_id", id)}).
		WithInfo(NewerFormatReason, nil)
}

// runExcused runs c on st with its running turn first excused the outages
// this process saw during it; the excuse's event comes first. A refusal
// commits no excuse: the next command, or the next wake-up, does.
func (h *Handler) runExcused(c command, st *model.State, now time.Time) (model.Change, error) {
	if err := writable(st); err != nil {
		return model.Change{}, err
	}
	ex, ok := h.excuse(st, now)
	if !ok {
		return c.run(st, now)
	}
	ch, err := c.run(ex.State, now)
	if err != nil || ch.State == nil {
		return ch, err
	}
	ch.Events = append(ex.Events, ch.Events...)
	// The excuse moved the game's wake-up: its keys must live to it.
	ch.Presence = false
	return ch, nil
}

// expireExcused is model.Expire with the running turn first excused the
// outages this process saw: a wake-up due during an outage is moved
// later, and committed so that the new one is indexed, rather than
// flagging a player who could not move.
//
// A deadline that is not the game's current one judges the current one
// when that is due: a commit held past --clock-stale-after had its wake-up
// dropped from the index as stale before it landed, and should its
// process die before it indexed another, an entry left over from before
// or after is all that still brings a sweeper to the game.
func (h *Handler) expireExcused(st *model.State, atMs int64, now time.Time) (model.Change, bool, error) {
	if err := writable(st); err != nil {
		return model.Change{}, false, err
	}
	if st.WakeMs != 0 && st.WakeMs != atMs && st.WakeMs <= now.UnixMilli() {
		atMs = st.WakeMs
	}
	ex, ok := h.excuse(st, now)
	if !ok || st.WakeMs != atMs || atMs > now.UnixMilli() {
		return model.Expire(st, atMs, now)
	}
	ch, applied, err := model.Expire(ex.State, ex.State.WakeMs, now)
	switch {
	case err != nil:
		return model.Change{}, false, err
	case !applied:
		// Nothing more is due: the excuse alone is committed, to index the
		// wake-up it moved.
		return ex, true, nil
	}
	ch.Events = append(ex.Events, ch.Events...)
	return ch, true, nil
}

// onlyExcused reports whether ch does nothing but excuse an outage.
func onlyExcused(ch model.Change) bool {
	for _, e := range ch.Events {
		if !isExcuse(e) {
			return false
		}
	}
	return len(ch.Events) > 0
}

// isExcuse reports whether e gives back time lost to an outage.
func isExcuse(e *gamev1.Event) bool {
	return e.GetClock().GetKind() == gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED
}

// excuse is the change excusing what runs against the side to move (its
// turn, its choice of a formation, its wait for a first move) the hold of
// the commit that began it (model.State.Held) and the outages this
// process saw during it; ok is false when it has nothing more to excuse.
func (h *Handler) excuse(st *model.State, now time.Time) (model.Change, bool) {
	startMs, excusedMs, ok := model.Waiting(st)
	if !ok {
		return model.Change{}, false
	}
	// An outage that began after the time ran out saved nothing: the side
	// had lost on time before it, and is judged so.
	budget := int64(math.MaxInt64)
	if due, ok := model.Due(st); ok {
		budget = due - startMs - excusedMs
	}
	var total time.Duration
	if st.Held.TurnStartMs == startMs {
		// A turn that began before anyone could see it: its whole hold,
		// whenever its time would have run out, and the outages after it,
		// as if the turn began with the move seen; the hold spends none of
		// the budget, as an outage does not.
		total = time.Duration(st.Held.Ms) * time.Millisecond
		startMs += st.Held.Ms
	}
	total += h.outages.before(startMs, now.UnixMilli(), budget)
	if already := time.Duration(excusedMs) * time.Millisecond; already > 0 && total-already < minMoreExcused {
		// Another process excused this outage, seen through its own pings
		// and reconnections: what it seems to have left out is the noise
		// between two views of one outage, not worth another event.
		return model.Change{}, false
	}
	return model.Excuse(st, total, now)
}

// judged is st as this process would judge it at now: the outages it
// knows of (its own, and the service's silences, which every process
// learns before it serves) excused, as its next command on the game
// excuses them first. Reads show it, so that an app is not shown a flag
// that no command will give, nor clocks short by time nobody could move
// in, until someone commits the excuse.
func (h *Handler) judged(st *model.State, now time.Time) *model.State {
	if ch, ok := h.excuse(st, now); ok {
		return ch.State
	}
	return st
}

// excuseHeld excuses the turn that a held commit began (store.Result.Held)
// in a commit of its own, at once, so that apps show the time given back
// before anyone acts. Whoever acts first, elsewhere, excuses it alike:
// the commit recorded its hold (model.State.Held).
func (h *Handler) excuseHeld(ctx context.Context, st *model.State, now time.Time) {
	ch, ok := h.excuse(st, now)
	if !ok {
		return
	}
	h.log.WarnContext(ctx, "a commit landed late: the turn it began is not charged the time it was held", "game", st.ID, "held", time.Duration(st.Held.Ms)*time.Millisecond)
	if _, err := h.commit(ctx, st, ch, command{id: st.ID}, now, nil); err != nil {
		h.log.WarnContext(ctx, "excuse the turn a late commit began", "game", st.ID, "err", err)
	}
}

// minMoreExcused is the least a turn excused already is excused more: two
// processes' views of one outage differ by up to a ping interval at each
// end, and by their clients' reconnections.
const minMoreExcused = 2*reachEvery + 250*time.Millisecond

// errConflict is a lost compare-and-set: the command is run again on the
// game as it is now.
var errConflict = errors.New("version conflict")

// backoff waits before a retry after a lost compare-and-set, a random
// time growing with the attempt, so writers in different processes stop
// colliding in lockstep.
func backoff(ctx context.Context, attempt int) error {
	if attempt == 0 {
		return nil
	}
	t := time.NewTimer(rand.N(time.Duration(min(attempt, 8)) * time.Millisecond))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// commitEnd is when an outage under way ends, for a commit of a command
// judged at judged and answered at answered (wrote: Redis took it).
// Answered, not judged, as a rule: a command judged on a cached state
// touched Redis first with its commit, which a stalled Redis held; ended
// at the judgment, the outage would be cut short, or (judged before a
// ping found Redis gone) forgotten, and the turn that began with the
// command charged the stall. But a write taken without being held
// (answered within reachTimeout) shows Redis taking writes when the
// command was judged, as closely as the pings can tell: the outage ends
// there, and the turn the command began is not excused the commit's own
// round trip. (No read ends an outage of writes refused, so the first
// commit taken often ends it.)
func commitEnd(judged, answered time.Time, wrote bool) time.Time {
	if wrote && answered.Sub(judged) < reachTimeout {
		return judged
	}
	return answered
}

// aiTurn names the AI's pending action in st ("" when none): the same
// name before and after a commit means the job was already queued.
func aiTurn(st *model.State) (aijobs.Kind, string) {
	if st == nil || st.Status.Finished() {
		return "", ""
	}
	side := st.Turn()
	if st.Seats[side].AILevel == 0 {
		return "", ""
	}
	if st.Status == model.StatusSetup {
		return aijobs.KindFormation, fmt.Sprintf("setup/%d", side)
	}
	return aijobs.KindMove, fmt.Sprintf("ply/%d", len(st.Moves))
}

// writesAhead reports whether committing next over prev writes ahead of
// the commit: an AI job, or a deadline.
func (h *Handler) writesAhead(prev, next *model.State) bool {
	if next.WakeMs != 0 && next.WakeMs != prev.WakeMs {
		return true
	}
	return h.aiJobDue(prev, next)
}

// aiJobDue reports whether committing next over prev makes it an AI's
// turn that prev was not, so that its job is to be queued.
func (h *Handler) aiJobDue(prev, next *model.State) bool {
	if h.cfg.AIJobs == nil {
		return false
	}
	kind, key := aiTurn(next)
	_, prevKey := aiTurn(prev)
	return kind != "" && key != prevKey
}

// mayWriteAhead reports whether a command on st may write ahead of its
// commit: in a game with a clock, an AI seat or a deadline under way.
func mayWriteAhead(st *model.State) bool {
	return st.WakeMs != 0 || st.Clock != nil || st.Seats[0].AILevel != 0 || st.Seats[1].AILevel != 0
}

// queueAI queues the AI's job that committing next over prev makes due,
// and returns it (nil when none is due).
func (h *Handler) queueAI(ctx context.Context, prev, next *model.State, now time.Time) (*aijobs.Job, error) {
	if !h.aiJobDue(prev, next) {
		return nil, nil
	}
	kind, _ := aiTurn(next)
	side := next.Turn()
	tok, err := h.ring.Sign(auth.Claims{
		Kind: auth.KindSeat, Subject: next.Seats[side].PlayerID, Game: next.ID, Side: side.String(),
		// As long as a player's: a job waits as long as the workers are
		// down, and one whose credential ran out would strand the game.
		IssuedAt: now.Unix(), ExpiresAt: now.Add(h.cfg.SeatTTL).Unix(),
	})
	if err != nil {
		return nil, fmt.Errorf("sign ai seat: %w", err)
	}
	j := aijobs.Job{
		GameID: next.ID, Version: next.Version, Kind: kind, Side: side.String(), Token: tok,
		// Dated as queued, not as judged: a worker takes a job older than
		// its look for the commit for a later try, and looks only once.
		Level: next.Seats[side].AILevel, EnqueuedMs: h.now().UnixMilli(),
		// Between two AI seats no person waits on this job.
		Background: next.Seats[side.Opponent()].AILevel != 0,
		Mark:       strconv.FormatUint(rand.Uint64(), 36),
	}
	if err := h.cfg.AIJobs.Enqueue(ctx, j); err != nil {
		return nil, err
	}
	return &j, nil
}

// aiJobLate is how long after its AI job a commit may land before a
// worker may have looked for it and missed it (aijobs.Queue.MarkUnseen):
// a worker looks a second for a job's commit before it puts the job back.
// A commit later than that asks whether one did, and queues the job again
// if so, for the AI's clock runs from the commit on (its hold excused),
// not from the worker's next look. Only if so: a worker that saw the
// commit plays the job, and a second one would search the same position
// at once.
const aiJobLate = 500 * time.Millisecond

// queueAIAgain queues job, the AI's job of a commit that landed late,
// again if a worker looked for the commit and missed it (aiJobLate): it
// put the job back for a later look, or gave it up as void (2 minutes on),
// and nothing else would queue it again; an untimed game would wait on the
// AI for ever. A second job for the same version is harmless: the AI's
// move is one request. When the mark cannot be read, the job is queued
// again, a search twice being better than none.
func (h *Handler) queueAIAgain(ctx context.Context, job *aijobs.Job, prev, next *model.State, now time.Time) {
	if job == nil {
		return
	}
	missed, err := h.cfg.AIJobs.TakeUnseen(ctx, *job)
	if err != nil {
		h.log.WarnContext(ctx, "ai job of a late commit", "game", next.ID, "err", err)
	}
	if !missed && err == nil {
		return
	}
	if _, err := h.queueAI(ctx, prev, next, now); err != nil {
		h.log.WarnContext(ctx, "queue the ai job again after a late commit", "game", next.ID, "err", err)
	}
}

// load reads a game, reusing the cached replay of the same version and
// learning Redis' time.
func (h *Handler) load(ctx context.Context, id, requestID string) (store.Loaded, error) {
	l, err := h.store.Load(ctx, id, requestID)
	return h.finishLoad(ctx, id, l, err)
}

// loadForCommand is load for a command, which also reads the game's
// request fields if ids asks for them and the cache does not know them,
// so that the next command may take the fast path.
func (h *Handler) loadForCommand(ctx context.Context, id, requestID string, ids bool) (store.Loaded, error) {
	if !ids || h.cache.knowsIDs(id) {
		return h.load(ctx, id, requestID)
	}
	l, err := h.store.LoadWithRequestIDs(ctx, id, requestID)
	return h.finishLoad(ctx, id, l, err)
}

// finishLoad is what every load of game id does with what it read.
func (h *Handler) finishLoad(ctx context.Context, id string, l store.Loaded, err error) (store.Loaded, error) {
	// A game not found comes with the time too.
	h.learnRedisTime(l.Now)
	if err != nil {
		return l, err
	}
	if l.State != nil {
		l.State.SetReplayed(h.cache.replayed(id, l.State.Version, l.State.Stamp))
	}
	if l.Previous != nil {
		// A retry: exec confirms before it answers from the remembered
		// answer, which shows nothing of the game as it is.
		return l, nil
	}
	err = h.confirmLoaded(ctx, id, &l)
	return l, err
}

// confirmLoaded confirms the latest commit of a game just read when it is
// unconfirmed: nothing is shown or decided on a commit that a failover
// could take back (a read, a command's refusal such as "it is Red's turn",
// a timeout), so that is confirmed first, or the call answers Unavailable.
// A turn that the commit began is seen only now: l's state learns the hold
// recorded for it, and l is judged no earlier than the end of that hold,
// which the read came before (an excuse covers no time to come).
func (h *Handler) confirmLoaded(ctx context.Context, id string, l *store.Loaded) error {
	if !l.Unconfirmed {
		return nil
	}
	held, err := h.confirm(ctx, id)
	if err == nil && held.Ms > 0 && l.State != nil {
		l.State.Held = held
		if seen := time.UnixMilli(held.TurnStartMs + held.Ms); seen.After(l.Now) {
			l.Now = seen
		}
	}
	return err
}

// now is Redis' time: its TIME at the last read, plus the time since on
// this process's monotonic clock, so a step of the host's wall clock
// changes nothing. Before any read, it is the host's clock.
func (h *Handler) now() time.Time {
	a := h.redisTime.Load()
	if a == nil {
		return time.Now()
	}
	return a.redis.Add(time.Since(a.local))
}

// learnRedisTime anchors now() to redisNow, Redis TIME read just now; a
// zero time (a read that failed) teaches nothing. Redis answered, so an
// outage under way ends there.
//
// Every reading is behind by the time its reply took to be handled, so
// one behind what now() says is a late reply, not news: taken, it would
// turn the process' time back, judging commands on cached states early
// (a move past its flag accepted) and dating events before earlier ones.
// It is taken only when now() may have drifted (its anchor is older than
// reanchorAfter) or Redis' own clock changed (a failover to another host):
// behind by bigClockStep or more.
func (h *Handler) learnRedisTime(redisNow time.Time) {
	if redisNow.IsZero() {
		return
	}
	local := time.Now()
	for {
		old := h.redisTime.Load()
		if old != nil {
			age := local.Sub(old.local)
			back := old.redis.Add(age).Sub(redisNow)
			if back > 0 && back < bigClockStep && age < reanchorAfter {
				break
			}
		}
		if h.redisTime.CompareAndSwap(old, &timeAnchor{redis: redisNow, local: local}) {
			break
		}
	}
	h.reached(redisNow, false)
}

// How learnRedisTime tells a late reply from a clock that moved.
const (
	reanchorAfter = time.Minute
	bigClockStep  = 5 * time.Second
)

// syncTime reads Redis TIME. A process whose commands all run on cached
// states reads it nowhere else, so the lease loop calls it too.
func (h *Handler) syncTime(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	t, err := h.store.Time(ctx)
	if err != nil {
		h.log.WarnContext(ctx, "redis time", "err", err)
		return
	}
	h.learnRedisTime(t)
}

// StaleVersionReason is the ErrorInfo reason of a refused expected_version;
// its metadata carries current_version, so clients need not parse the
// message.
const StaleVersionReason = "STALE_VERSION"

func staleVersion(expected, current uint64) error {
	format := "stale version: expected_version %d, but the game is at version %d; read it and retry"
	if expected > current {
		format = "expected_version %d is ahead of the game, which is at version %d; read it and retry"
	}
	meta := map[string]string{"current_version": strconv.FormatUint(current, 10), "expected_version": strconv.FormatUint(expected, 10)}
	return apierr.New(apierr.Conflict, format, expected, current).WithInfo(StaleVersionReason, meta)
}

// commit stores ch over prev. The new deadline is indexed before the
// commit (so it can never be lost) and the replaced one removed after.
// fields are the game's request fields as of prev, when read with it.
func (h *Handler) commit(ctx context.Context, prev *model.State, ch model.Change, c command, now time.Time, fields []string) (proto.Message, error) {
	var prevVersion uint64
	if prev != nil {
		prevVersion = prev.Version
	}
	model.Seal(ch, prevVersion, now)
	var resp proto.Message
	var raw []byte
	reqID := c.field()
	if ch.Reply == nil && c.respond != nil {
		resp = c.respond(ch, now)
		var err error
		restore := func() {}
		if a, ok := resp.(answer); ok {
			restore = model.StripLegalMoves(a.GetGame())
		}
		// Encoded straight after its label: the answer is not copied again.
		raw, err = proto.MarshalOptions{}.MarshalAppend(labelPrefix(c.label), resp)
		restore()
		if err != nil {
			return nil, fmt.Errorf("encode answer: %w", err)
		}
	} else {
		// A refused command that still changed the game (a late command
		// ending it on time, a late formation choice setting the default)
		// remembers nothing: a retry sees the game as that left it.
		reqID = ""
	}
	var oldWake int64
	if prev != nil {
		oldWake = prev.WakeMs
	}
	// Like a deadline, the AI's job is queued before the commit that makes
	// it the AI's turn, so a crash in between cannot strand an AI game; a
	// worker that finds the commit missing drops the job.
	queued := time.Now()
	job, err := h.queueAI(ctx, prev, ch.State, now)
	if err != nil {
		return nil, err
	}
	newWake := ch.State.WakeMs
	if newWake != 0 && newWake != oldWake {
		if err := h.index.Add(ctx, deadline.Entry{GameID: ch.State.ID, At: time.UnixMilli(newWake)}); err != nil {
			return nil, err
		}
	}
	res, err := h.store.Commit(ctx, prev, ch, reqID, raw, now)
	// Every caller checked prev before running the command on it (writable);
	// the store refuses too.
	if errors.Is(err, store.ErrNewerFormat) {
		return nil, newerFormat(ch.State.ID, err)
	}
	if err != nil {
		h.confirmLater(ch.State.ID)
		// The commit may have been made: the entry stays, the last state
		// known confirmed, but no command writes ahead on it (its retry,
		// taking this request id for a new one; another, on a state that
		// may be behind) before a read from Redis.
		h.cache.unsure(ch.State.ID)
		return nil, err
	}
	wrote := res.Outcome == store.Committed
	answered := h.now()
	h.reached(commitEnd(now, answered, wrote), wrote)
	switch res.Outcome {
	case store.Duplicate:
		// What this process knew of the game's request ids missed one
		// (another process's command): read them again before writing
		// anything ahead of a commit.
		h.cache.drop(ch.State.ID)
		return c.remembered(res.Previous)
	case store.Conflict:
		return nil, errConflict
	}
	h.metrics.commits.Add(ctx, 1)
	if time.Since(queued) > aiJobLate {
		h.queueAIAgain(ctx, job, prev, ch.State, now)
	}
	for _, e := range ch.Events {
		if isExcuse(e) {
			h.metrics.excused.Add(ctx, 1)
		}
	}
	if res.Held.Ms > 0 {
		// As the commit recorded it, in this process's copy too; otherwise
		// the hold recorded before stands, in Redis as in the copy.
		ch.State.Held = res.Held
	}
	if ch.State.Status.Finished() {
		h.cache.drop(ch.State.ID)
	} else {
		h.cache.put(ch.State, prev, reqID, raw, fields)
	}
	if res.Held.Ms > 0 && newWake != 0 {
		// Indexed again before the old entry goes: a sweeper may have
		// dropped the entry as stale while the commit was held, and the
		// old one is what brings a sweeper back should this process die
		// before it indexes anything else (see expireExcused).
		if err := h.index.Add(ctx, deadline.Entry{GameID: ch.State.ID, At: time.UnixMilli(newWake)}); err != nil {
			h.log.WarnContext(ctx, "index again the deadline of a held commit", "game", ch.State.ID, "err", err)
		}
	}
	if oldWake != 0 && oldWake != newWake {
		// Best effort: a left-over entry is only a stale wake-up that the
		// sweeper will find changes nothing.
		if err := h.index.Remove(ctx, deadline.Entry{GameID: ch.State.ID, At: time.UnixMilli(oldWake)}); err != nil {
			h.log.WarnContext(ctx, "remove replaced deadline", "game", ch.State.ID, "err", err)
		}
	}
	if res.Held.Ms > 0 {
		h.excuseHeld(ctx, ch.State, answered)
	}
	if ch.Reply != nil {
		return nil, ch.Reply
	}
	return resp, nil
}

// labelMark starts a remembered answer that is stored behind the label of
// the command it answered. A protobuf answer never starts with it (its
// first byte is the tag of field 1 or 2); answers stored before labels
// existed have none.
const labelMark = 0xff

// labelPrefix is what a remembered answer is stored behind: the mark,
// label (which holds no NUL), and a NUL.
func labelPrefix(label string) []byte {
	b := make([]byte, 0, len(label)+2)
	b = append(b, labelMark)
	b = append(b, label...)
	return append(b, 0)
}

// errOtherSeatsID: the answer found under a seat command's request id is
// another asker's (the other seat's, or the creator's). Each seat's ids are its own, so the command is looked
// up and remembered under the seat's own field (command.scoped) instead.
var errOtherSeatsID = errors.New("request id used by the other seat")

// field is the request id's field among the game's remembered answers: the
// id itself, or, when the other seat's command took that first, the id
// behind the seat's name (request ids hold no '|').
func (c command) field() string {
	if !c.scoped {
		return c.requestID
	}
	return c.side.String() + "|" + c.requestID
}

// remembered decodes the answer stored for c's request id. An answer to
// another command of the same asker (a request id used again) is refused:
// answering it as a retry would tell the client that a command nobody ran
// succeeded. For a seat's command, one to anyone else's command (the other
// seat's, the game's creation) is errOtherSeatsID.
func (c command) remembered(stored []byte) (proto.Message, error) {
	if len(stored) > 0 && stored[0] == labelMark {
		label, raw, ok := bytes.Cut(stored[1:], []byte{0})
		if !ok {
			return nil, fmt.Errorf("remembered answer of game %s: no end to its label", c.id)
		}
		if c.seated && !c.scoped && !bytes.HasPrefix(label, []byte(seatLabel(c.side, ""))) {
			// Another asker's: the other seat's, or the creator's.
			return nil, errOtherSeatsID
		}
		if string(label) != c.label {
			return nil, apierr.New(apierr.Invalid, "request_id %q was already used in this game for %s: only a retry of that command may use it again; give every other command a request_id of its own", textcut.Quote(c.requestID, 16, "..."), label)
		}
		stored = raw
	}
	return c.decode(stored)
}

// answer is the answer to a command: every one carries the game.
type answer interface {
	proto.Message
	GetGame() *gamev1.Game
}

// decodeInto reads a remembered answer, which is kept without its legal
// moves (model.StripLegalMoves).
func decodeInto[T answer](m T) func([]byte) (proto.Message, error) {
	return func(b []byte) (proto.Message, error) {
		if err := proto.Unmarshal(b, m); err != nil {
			return nil, fmt.Errorf("decode remembered answer: %w", err)
		}
		if err := model.RestoreLegalMoves(m.GetGame()); err != nil {
			return nil, fmt.Errorf("decode remembered answer: %w", err)
		}
		return m, nil
	}
}

func gameOf(ch model.Change, now time.Time) *gamev1.Game { return model.Summary(ch.State, nil, now) }

func lastMove(ch model.Change) *gamev1.MoveRecord {
	for i := len(ch.Events) - 1; i >= 0; i-- {
		if m := ch.Events[i].GetMovePlayed(); m != nil {
			return m
		}
	}
	return nil
}

// gameID derives a new game's id from its request: a retried CreateGame
// finds the game it created, on any process and across upgrades (the
// caller's name is left out: it depends on how a deployment runs its
// services), while two different requests that happen to share a
// request_id still get two games.
func gameID(req *gamev1.CreateGameRequest) string {
	if req.GetPlayersMayAbort() {
		// Not part of the game's identity: a creation sent again by a newer
		// client that asks for it (a matchmaking replica upgraded between
		// two attempts) finds the game of the first attempt.
		req = proto.CloneOf(req)
		req.PlayersMayAbort = false
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	sum := sha256.Sum256(b)
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:10]))
}

// seatLabel labels a seat's command.
func seatLabel(s rules.Side, what string) string { return "the " + s.String() + " seat's " + what }

// CreateGame creates a game and returns one credential per human seat.
func (h *Handler) CreateGame(ctx context.Context, req *gamev1.CreateGameRequest) (*gamev1.CreateGameResponse, error) {
	if err := h.internal(ctx, "CreateGame"); err != nil {
		return nil, h.fail(ctx, err)
	}
	p, err := h.createParams(req)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	c := command{
		id: p.ID, requestID: req.GetRequestId(), label: "creating the game",
		respond: func(ch model.Change, now time.Time) proto.Message {
			resp := &gamev1.CreateGameResponse{GameId: ch.State.ID, Game: gameOf(ch, now)}
			for _, side := range []rules.Side{rules.First, rules.Second} {
				// The AI's seat takes no credential, as IssueSeatCredentials
				// refuses it one: its worker signs its own for each job, and
				// one handed to the caller would let whoever it reaches act
				// as the AI (resign for it, offer draws, race its moves).
				if ch.State.Seats[side].AILevel > 0 {
					continue
				}
				resp.Credentials = append(resp.Credentials, h.seatCredential(ctx, ch.State, side, now))
			}
			return resp
		},
		decode: decodeInto(&gamev1.CreateGameResponse{}),
	}
	// A retry is answered from the game it made, before anything is
	// written: its AI job or setup deadline must not be queued again.
	// Under the game's lock, so that one racing it here waits for it.
	unlock, err := h.locks.lock(ctx, p.ID)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	defer unlock()
	l, err := h.load(ctx, p.ID, c.requestID)
	switch {
	case err == nil && l.Previous != nil:
		if _, err := h.confirm(ctx, p.ID); err != nil {
			return nil, h.fail(ctx, err)
		}
		resp, err := c.remembered(l.Previous)
		if err != nil {
			return nil, h.fail(ctx, err)
		}
		created := resp.(*gamev1.CreateGameResponse)
		dropAICredentials(created)
		h.freshen(ctx, created, l.Now)
		return created, nil
	case err == nil:
		return nil, h.fail(ctx, apierr.New(apierr.AlreadyExists, "game %s already exists", p.ID))
	case !errors.Is(err, store.ErrNotFound):
		return nil, h.fail(ctx, err)
	}
	now := l.Now
	ch, err := model.Create(p, now)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	resp, err := h.commit(ctx, nil, ch, c, now, nil)
	if err != nil {
		if errors.Is(err, errConflict) {
			// The id exists with another request id: a hash collision of two
			// different requests, practically impossible.
			return nil, h.fail(ctx, apierr.New(apierr.AlreadyExists, "game %s already exists", p.ID))
		}
		return nil, h.fail(ctx, err)
	}
	return resp.(*gamev1.CreateGameResponse), nil
}

func (h *Handler) createParams(req *gamev1.CreateGameRequest) (model.CreateParams, error) {
	var errs []error
	if err := checkID("request_id", req.GetRequestId(), MaxRequestIDBytes); err != nil {
		errs = append(errs, err)
	}
	v, kindErr := rulespb.Variant(req.GetKind())
	if kindErr != nil {
		errs = append(errs, apierr.Wrap(apierr.Invalid, kindErr))
	}
	p := model.CreateParams{ID: gameID(req), Variant: v, Public: req.GetPublic(), Rated: req.GetRated(), PlayersMayAbort: req.GetPlayersMayAbort(), Lag: h.cfg.Lag}
	if len(req.GetSeats()) != 2 {
		errs = append(errs, apierr.New(apierr.Invalid, "seats: want exactly 2 (one per side), got %d", len(req.GetSeats())))
	} else {
		var seen [2]bool
		for i, s := range req.GetSeats() {
			side, err := rulespb.SideFrom(s.GetSide())
			// Every app shows the name on one line, as a guest's nickname.
			var nameErr error
			if s.GetDisplayName() != "" {
				nameErr = displayname.Check(fmt.Sprintf("seats[%d].display_name", i), s.GetDisplayName())
			}
			switch {
			case err != nil:
				errs = append(errs, apierr.New(apierr.Invalid, "seats[%d].%v", i, err))
				continue
			case seen[side]:
				errs = append(errs, apierr.New(apierr.Invalid, "seats[%d]: side %v appears twice", i, s.GetSide()))
				continue
			}
			// Each field is named, so that a caller mends them all at once.
			if nameErr != nil {
				errs = append(errs, nameErr)
			}
			if len(s.GetPlayerId()) > MaxPlayerIDBytes {
				errs = append(errs, apierr.New(apierr.Invalid, "seats[%d].player_id: longer than %d bytes", i, MaxPlayerIDBytes))
			}
			if s.GetAiLevel() > 10 {
				errs = append(errs, apierr.New(apierr.Invalid, "seats[%d].ai_level: %d is out of range 0..10", i, s.GetAiLevel()))
			}
			seen[side] = true
			// Stored as checked: without the spaces around it.
			p.Seats[side] = model.Seat{PlayerID: s.GetPlayerId(), Name: strings.TrimSpace(s.GetDisplayName()), AILevel: int(s.GetAiLevel())}
		}
	}
	if p.Seats[rules.First].AILevel > 0 && p.Seats[rules.Second].AILevel > 0 && !req.GetPublic() {
		// Its seats take no credential: nobody could read it.
		errs = append(errs, apierr.New(apierr.Invalid, "public: a game between two AI seats must be public, since neither seat takes a credential to read a private game with"))
	}
	if fen := req.GetStart().GetFen(); fen != "" {
		switch {
		case len(fen) > MaxFENBytes:
			errs = append(errs, apierr.New(apierr.Invalid, "start: FEN longer than %d bytes", MaxFENBytes))
		case kindErr == nil:
			// Read here, so that a FEN that does not parse is refused
			// before the game's id is looked up in Redis.
			g, err := model.StartFrom(v, fen)
			if err != nil {
				errs = append(errs, err)
			}
			p.Start = g
		}
	}
	p.Control = model.ControlFromPB(req.GetTimeControl())
	switch {
	case req.GetTimeControl() != nil && p.Control == nil:
		// Taken for "no clock", a client's mistake would start a game
		// nobody can lose on time.
		errs = append(errs, apierr.New(apierr.Invalid, "time_control: set byo_yomi or fischer, or leave time_control unset for a game without a clock"))
	case p.Control != nil:
		if err := p.Control.Validate(); err != nil {
			errs = append(errs, apierr.New(apierr.Invalid, "time_control: %v", err))
		}
	}
	p.SetupTime = durationOr(req.GetSetupTime().AsDuration(), h.cfg.SetupTime)
	p.FirstMoveTime = durationOr(req.GetFirstMoveTime().AsDuration(), h.cfg.FirstMoveTime)
	if p.SetupTime < MinSetupTime || p.SetupTime > MaxSetupTime {
		errs = append(errs, apierr.New(apierr.Invalid, "setup_time: %s is out of range %v..%v", shown(p.SetupTime), MinSetupTime, MaxSetupTime))
	}
	if p.FirstMoveTime < MinFirstMoveTime || p.FirstMoveTime > MaxFirstMoveTime {
		errs = append(errs, apierr.New(apierr.Invalid, "first_move_time: %s is out of range %v..%v", shown(p.FirstMoveTime), MinFirstMoveTime, MaxFirstMoveTime))
	}
	return p, apierr.Problems(errs...)
}

// shown writes a duration for a refusal. A protobuf Duration beyond
// time.Duration's range arrives saturated, and would be shown as a
// figure the client never sent.
func shown(d time.Duration) string {
	switch d {
	case math.MaxInt64:
		return "over 292 years"
	case math.MinInt64:
		return "under -292 years"
	}
	return d.String()
}

func durationOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

type seatRequest interface {
	GetGameId() string
	GetRequestId() string
	GetExpectedVersion() uint64
}

// seatCommand validates the common fields and the caller's seat.
func (h *Handler) seatCommand(ctx context.Context, req seatRequest) (rules.Side, error) {
	if err := checkID("game_id", req.GetGameId(), MaxIDBytes); err != nil {
		return 0, err
	}
	if err := checkID("request_id", req.GetRequestId(), MaxRequestIDBytes); err != nil {
		return 0, err
	}
	return h.seat(ctx, req.GetGameId())
}

func (h *Handler) ChooseFormation(ctx context.Context, req *gamev1.ChooseFormationRequest) (*gamev1.ChooseFormationResponse, error) {
	side, err := h.seatCommand(ctx, req)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	const formations = "FORMATION_MA_SANG_SANG_MA, FORMATION_SANG_MA_SANG_MA, FORMATION_MA_SANG_MA_SANG, FORMATION_SANG_MA_MA_SANG"
	if req.GetFormation() == 0 {
		return nil, h.fail(ctx, apierr.New(apierr.Invalid, "formation: required, one of "+formations+" (in JSON, any other name is dropped and arrives unset)"))
	}
	f, err := rulespb.Formation(req.GetFormation())
	if err != nil {
		return nil, h.fail(ctx, apierr.New(apierr.Invalid, "formation: %v: want one of %s", err, formations))
	}
	resp, err := h.exec(ctx, "choose_formation", command{
		id: req.GetGameId(), requestID: req.GetRequestId(), expected: req.GetExpectedVersion(),
		seated: true, side: side, label: seatLabel(side, "formation "+f.String()),
		run: func(st *model.State, now time.Time) (model.Change, error) {
			return model.ChooseFormation(st, side, f, now)
		},
		respond: func(ch model.Change, now time.Time) proto.Message {
			return &gamev1.ChooseFormationResponse{Game: gameOf(ch, now)}
		},
		decode: decodeInto(&gamev1.ChooseFormationResponse{}),
	})
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	return resp.(*gamev1.ChooseFormationResponse), nil
}

func lagOf(d time.Duration) time.Duration { return max(0, d) }

func (h *Handler) MakeMove(ctx context.Context, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
	side, err := h.seatCommand(ctx, req)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	text := req.GetMove().GetCoordinate()
	if text == "" || len(text) > MaxMoveBytes {
		return nil, h.fail(ctx, apierr.New(apierr.Invalid, "move: want coordinate notation such as \"h3e3\", got %q", textcut.Quote(text, 16, "...")))
	}
	parsed, err := rules.ParseMove(text)
	if err != nil {
		return nil, h.fail(ctx, apierr.New(apierr.Invalid, "move %q: %v", text, err))
	}
	lag := lagOf(req.GetReportedLag().AsDuration())
	resp, err := h.exec(ctx, "move", command{
		id: req.GetGameId(), requestID: req.GetRequestId(), expected: req.GetExpectedVersion(),
		seated: true, side: side, label: seatLabel(side, "move "+parsed.String()),
		run: func(st *model.State, now time.Time) (model.Change, error) {
			return model.Move(st, side, text, lag, now)
		},
		respond: func(ch model.Change, now time.Time) proto.Message {
			return &gamev1.MakeMoveResponse{Game: gameOf(ch, now), Move: lastMove(ch)}
		},
		decode: decodeInto(&gamev1.MakeMoveResponse{}),
	})
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	return resp.(*gamev1.MakeMoveResponse), nil
}

func (h *Handler) Pass(ctx context.Context, req *gamev1.PassRequest) (*gamev1.PassResponse, error) {
	side, err := h.seatCommand(ctx, req)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	lag := lagOf(req.GetReportedLag().AsDuration())
	resp, err := h.exec(ctx, "pass", command{
		id: req.GetGameId(), requestID: req.GetRequestId(), expected: req.GetExpectedVersion(),
		seated: true, side: side, label: seatLabel(side, "pass"),
		run: func(st *model.State, now time.Time) (model.Change, error) { return model.Pass(st, side, lag, now) },
		respond: func(ch model.Change, now time.Time) proto.Message {
			return &gamev1.PassResponse{Game: gameOf(ch, now), Move: lastMove(ch)}
		},
		decode: decodeInto(&gamev1.PassResponse{}),
	})
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	return resp.(*gamev1.PassResponse), nil
}

func (h *Handler) Resign(ctx context.Context, req *gamev1.ResignRequest) (*gamev1.ResignResponse, error) {
	side, err := h.seatCommand(ctx, req)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	resp, err := h.exec(ctx, "resign", command{
		id: req.GetGameId(), requestID: req.GetRequestId(), expected: req.GetExpectedVersion(),
		seated: true, side: side, label: seatLabel(side, "resignation"),
		run: func(st *model.State, now time.Time) (model.Change, error) { return model.Resign(st, side, now) },
		respond: func(ch model.Change, now time.Time) proto.Message {
			return &gamev1.ResignResponse{Game: gameOf(ch, now)}
		},
		decode: decodeInto(&gamev1.ResignResponse{}),
	})
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	return resp.(*gamev1.ResignResponse), nil
}

func (h *Handler) Abort(ctx context.Context, req *gamev1.AbortRequest) (*gamev1.AbortResponse, error) {
	side, err := h.seatCommand(ctx, req)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	resp, err := h.exec(ctx, "abort", command{
		id: req.GetGameId(), requestID: req.GetRequestId(), expected: req.GetExpectedVersion(),
		seated: true, side: side, label: seatLabel(side, "abort"),
		run: func(st *model.State, now time.Time) (model.Change, error) { return model.Abort(st, side, now) },
		respond: func(ch model.Change, now time.Time) proto.Message {
			return &gamev1.AbortResponse{Game: gameOf(ch, now)}
		},
		decode: decodeInto(&gamev1.AbortResponse{}),
	})
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	return resp.(*gamev1.AbortResponse), nil
}

func (h *Handler) OfferDraw(ctx context.Context, req *gamev1.OfferDrawRequest) (*gamev1.OfferDrawResponse, error) {
	side, err := h.seatCommand(ctx, req)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	resp, err := h.exec(ctx, "offer_draw", command{
		id: req.GetGameId(), requestID: req.GetRequestId(), expected: req.GetExpectedVersion(),
		seated: true, side: side, label: seatLabel(side, "draw offer"),
		run: func(st *model.State, now time.Time) (model.Change, error) { return model.OfferDraw(st, side, now) },
		respond: func(ch model.Change, now time.Time) proto.Message {
			return &gamev1.OfferDrawResponse{Game: gameOf(ch, now)}
		},
		decode: decodeInto(&gamev1.OfferDrawResponse{}),
	})
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	return resp.(*gamev1.OfferDrawResponse), nil
}

func (h *Handler) AnswerDraw(ctx context.Context, req *gamev1.AnswerDrawRequest) (*gamev1.AnswerDrawResponse, error) {
	side, err := h.seatCommand(ctx, req)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	answered := "refusal of a draw"
	if req.GetAccept() {
		answered = "acceptance of a draw"
	}
	resp, err := h.exec(ctx, "answer_draw", command{
		id: req.GetGameId(), requestID: req.GetRequestId(), expected: req.GetExpectedVersion(),
		seated: true, side: side, label: seatLabel(side, answered),
		run: func(st *model.State, now time.Time) (model.Change, error) {
			return model.AnswerDraw(st, side, req.GetAccept(), now)
		},
		respond: func(ch model.Change, now time.Time) proto.Message {
			return &gamev1.AnswerDrawResponse{Game: gameOf(ch, now)}
		},
		decode: decodeInto(&gamev1.AnswerDrawResponse{}),
	})
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	return resp.(*gamev1.AnswerDrawResponse), nil
}

func (h *Handler) Undo(ctx context.Context, req *gamev1.UndoRequest) (*gamev1.UndoResponse, error) {
	side, err := h.seatCommand(ctx, req)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	resp, err := h.exec(ctx, "undo", command{
		id: req.GetGameId(), requestID: req.GetRequestId(), expected: req.GetExpectedVersion(),
		seated: true, side: side, label: seatLabel(side, "undo"),
		run: func(st *model.State, now time.Time) (model.Change, error) { return model.Undo(st, side, now) },
		respond: func(ch model.Change, now time.Time) proto.Message {
			return &gamev1.UndoResponse{Game: gameOf(ch, now)}
		},
		decode: decodeInto(&gamev1.UndoResponse{}),
	})
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	return resp.(*gamev1.UndoResponse), nil
}

// readable loads a game and checks that the caller may see it; without
// moves, the state has none (see store.LoadHead).
func (h *Handler) readable(ctx context.Context, id string, withMoves bool) (store.Loaded, *rules.Side, error) {
	return h.readableAfter(ctx, id, withMoves, 0)
}

// readableAfter is readable for a reader that needs the game's version to
// be at least after. Without moves, it starts from the state this process
// last committed when it has one that recent: who may read a game never
// changes after its creation, and a stream reads every later event from
// the log anyway. That spares a Redis round trip to every stream that
// (re)connects to the process that runs its game.
func (h *Handler) readableAfter(ctx context.Context, id string, withMoves bool, after uint64) (store.Loaded, *rules.Side, error) {
	if err := checkID("game_id", id, MaxIDBytes); err != nil {
		return store.Loaded{}, nil, err
	}
	// A credential that is no good is refused before Redis is asked
	// anything, which also keeps it from telling a private game that exists
	// from one that does not. Another game's seat, or a credential of
	// another kind, may still watch a public game: clients that send their
	// player's credential with every call can spectate as well.
	side, seated, credErr := h.credential(ctx, id, h.now())
	if credErr != nil && !errors.Is(credErr, errNotASeat) {
		return store.Loaded{}, nil, credErr
	}
	var l store.Loaded
	var err error
	if withMoves {
		l, err = h.load(ctx, id, "")
	} else if l = h.cachedHead(id, after); l.State == nil {
		l, err = h.store.LoadHead(ctx, id)
		h.learnRedisTime(l.Now)
		if err == nil {
			err = h.confirmLoaded(ctx, id, &l)
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		return l, nil, apierr.New(apierr.NotFound, "game %s not found", id)
	}
	if err != nil {
		return l, nil, err
	}
	switch {
	case seated:
		return l, &side, nil
	case l.State.Public:
		return l, nil, nil
	case credErr != nil:
		return l, nil, credErr
	}
	return l, nil, apierr.New(apierr.PermissionDenied, "game %s is private: a seat credential is required", id)
}

// cachedHead is the state this process last committed of game id, when it
// is at least version after and certainly still stored; State is nil
// otherwise.
func (h *Handler) cachedHead(id string, after uint64) store.Loaded {
	now := h.now()
	if st := h.cache.get(id); st != nil && after <= st.Version && h.store.Kept(st, now) {
		return store.Loaded{State: st, Now: now}
	}
	return store.Loaded{}
}

func (h *Handler) GetGame(ctx context.Context, req *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
	l, _, err := h.readable(ctx, req.GetGameId(), true)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	resp := &gamev1.GetGameResponse{Game: model.View(h.judged(l.State, l.Now), nil, l.Now)}
	server.CompressLarge(ctx, resp)
	return resp, nil
}

// MaxBatchGames bounds the games of one GetGames call: a player's list
// keeps as many.
const MaxBatchGames = 100

// GetGames reads many games for an internal caller, in one Redis round
// trip.
func (h *Handler) GetGames(ctx context.Context, req *gamev1.GetGamesRequest) (*gamev1.GetGamesResponse, error) {
	if err := h.internal(ctx, "GetGames"); err != nil {
		return nil, h.fail(ctx, err)
	}
	ids := req.GetGameIds()
	switch {
	case len(ids) == 0:
		return nil, h.fail(ctx, apierr.New(apierr.Invalid, "game_ids: at least one is required"))
	case len(ids) > MaxBatchGames:
		return nil, h.fail(ctx, apierr.New(apierr.Invalid, "game_ids: %d asked, at most %d in one call", len(ids), MaxBatchGames))
	}
	for i, id := range ids {
		if err := checkID(fmt.Sprintf("game_ids[%d]", i), id, MaxIDBytes); err != nil {
			return nil, h.fail(ctx, err)
		}
	}
	loaded, err := h.store.LoadMany(ctx, ids)
	if len(loaded) > 0 {
		h.learnRedisTime(loaded[0].Now)
	}
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	resp := &gamev1.GetGamesResponse{}
	for i, l := range loaded {
		if l.State == nil {
			resp.NotFound = append(resp.NotFound, ids[i])
			continue
		}
		// As GetGame: nothing is shown of a commit a failover could
		// take back.
		if err := h.confirmLoaded(ctx, ids[i], &l); err != nil {
			return nil, h.fail(ctx, err)
		}
		l.State.SetReplayed(h.cache.replayed(ids[i], l.State.Version, l.State.Stamp))
		resp.Games = append(resp.Games, model.Overview(h.judged(l.State, l.Now), l.Now))
	}
	server.CompressLarge(ctx, resp)
	return resp, nil
}

// ExpireDeadline ends a game on time, applies a default formation or
// aborts a game, when the deadline is still current.
func (h *Handler) ExpireDeadline(ctx context.Context, req *gamev1.ExpireDeadlineRequest) (*gamev1.ExpireDeadlineResponse, error) {
	begun := h.now()
	resp, err := h.expire(ctx, req)
	if err != nil {
		h.failedFor(ctx, begun, err)
		return nil, h.fail(ctx, err)
	}
	return resp, nil
}

// expire is ExpireDeadline, its errors not yet mapped to a status.
func (h *Handler) expire(ctx context.Context, req *gamev1.ExpireDeadlineRequest) (*gamev1.ExpireDeadlineResponse, error) {
	if err := h.internal(ctx, "ExpireDeadline"); err != nil {
		return nil, err
	}
	if err := checkID("game_id", req.GetGameId(), MaxIDBytes); err != nil {
		return nil, err
	}
	at := req.GetDeadlineUnixMs()
	unlock, err := h.locks.lock(ctx, req.GetGameId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	for attempt := range commitAttempts {
		if err := backoff(ctx, attempt); err != nil {
			return nil, err
		}
		l, err := h.load(ctx, req.GetGameId(), "")
		if errors.Is(err, store.ErrNotFound) {
			return h.expired(&gamev1.ExpireDeadlineResponse{Applied: false}), nil
		}
		if err != nil {
			return nil, err
		}
		ch, applied, err := h.expireExcused(l.State, at, l.Now)
		if err != nil {
			return nil, err
		}
		if !applied {
			return h.expired(&gamev1.ExpireDeadlineResponse{Applied: false, Game: model.View(l.State, nil, l.Now)}), nil
		}
		_, err = h.commit(ctx, l.State, ch, command{id: l.State.ID}, l.Now, nil)
		if errors.Is(err, errConflict) {
			h.metrics.conflicts.Add(ctx, 1)
			continue
		}
		if err != nil {
			return nil, err
		}
		// A change without events only moved a wake-up set on a milestone
		// announced already (model.Expire): for the sweeper, as for an
		// excuse, what the deadline brings is still to come.
		moved := len(ch.Events) == 0 || onlyExcused(ch)
		return h.expired(&gamev1.ExpireDeadlineResponse{Applied: true, Game: model.View(ch.State, nil, l.Now), Excused: moved}), nil
	}
	return nil, apierr.New(apierr.Unavailable, "game %s is too busy", req.GetGameId())
}

// expired completes an answer to ExpireDeadline with the index this
// service writes, which the clock service checks against its own.
func (h *Handler) expired(resp *gamev1.ExpireDeadlineResponse) *gamev1.ExpireDeadlineResponse {
	resp.DeadlineIndex = &gamev1.DeadlineIndex{KeyPrefix: h.index.Prefix(), Shards: uint32(h.index.Shards())}
	return resp
}

// Probe increments a counter: one Redis write behind the same server path
// as a command, the floor the load test compares moves against.
func (h *Handler) Probe(ctx context.Context, req *gamev1.ProbeRequest) (*gamev1.ProbeResponse, error) {
	if err := h.internal(ctx, "Probe"); err != nil {
		return nil, h.fail(ctx, err)
	}
	if err := checkID("key", req.GetKey(), MaxIDBytes); err != nil {
		return nil, h.fail(ctx, err)
	}
	n, err := h.store.Probe(ctx, req.GetKey())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	return &gamev1.ProbeResponse{Count: n}, nil
}
