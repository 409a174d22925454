// Package store keeps games in Redis. All keys of one game share the hash
// tag {g:<id>} so that every script touches one slot (Redis Cluster):
//
//	{g:<id>}     hash: v (version), n (the commit's stamp), h (the stamp of
//	             the last commit that logged events), s (state, JSON),
//	             x (the hold of the last commit held as it began a turn:
//	             model.State.Held), b (with replicas to wait for: the
//	             judgment and version of the last commit that began a
//	             turn, whose hold the confirmation measures),
//	             r:<request id> (the response given, protobuf), for
//	             idempotency
//	{g:<id>}:e   stream of events, entry id "<version>-1", field e (protobuf)
//	{g:<id>}:m   list of the moves played, one JSON record each
//
// The moves are kept apart from the state so that a move appends one record
// instead of rewriting (and re-encoding) the whole game.
//
// A commit is one Lua script: compare the version (and the stamp of the
// commit that stored it, model.State.Stamp), store the state and the
// response under the request id, append or cut back the moves, append the
// events, extend the expiry when it is due and publish a notification
// (when it logs events), all or nothing. The script makes as few calls as
// it can: each one costs Redis a few microseconds on every move.
//
// With Config.Replication, a commit is acknowledged only once replicas
// hold it (WAIT). Only then is its version recorded as confirmed (field c
// of the state hash) and its notification published, and reads show no
// more than that: a stream's reads of the log stop at the confirmed
// version, and a read of a game whose latest commit is unconfirmed
// confirms it first (Loaded.Unconfirmed, Confirm). So nobody sees a move
// that a failover could take back.
package store

import (
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/palacehq/palace/pkg/redisx"
	"github.com/palacehq/palace/services/game/internal/model"
)

// ErrNotFound means no game has that id (or it expired).
var ErrNotFound = errors.New("game not found")

// ErrNewerFormat means a game was stored by a newer build in a format
// this one would damage by writing it (model.Format).
var ErrNewerFormat = errors.New("game stored in a newer format")

// Writable reports ErrNewerFormat when st needs a newer build to write.
func Writable(st *model.State) error {
	if st != nil && st.Needs > model.Format {
		return fmt.Errorf("%w: game %s needs format %d, this build writes up to %d", ErrNewerFormat, st.ID, st.Needs, model.Format)
	}
	return nil
}

//go:embed commit.lua
var commitLua string

var commitScript = redis.NewScript(commitLua)

//go:embed read.lua
var readLua string

var readScript = redis.NewScript(readLua)

//go:embed confirm.lua
var confirmLua string

var confirmScript = redis.NewScript(confirmLua)

//go:embed confirmed.lua
var confirmedLua string

var confirmedScript = redis.NewScript(confirmedLua)

//go:embed claimlease.lua
var claimLeaseLua string

var claimLeaseScript = redis.NewScript(claimLeaseLua)

//go:embed released.lua
var releasedLua string

var releasedScript = redis.NewScript(releasedLua)

//go:embed holding.lua
var holdingLua string

var holdingScript = redis.NewScript(holdingLua)

//go:embed unlist.lua
var unlistLua string

var unlistScript = redis.NewScript(unlistLua)

//go:embed keepclaim.lua
var keepClaimLua string

var keepClaimScript = redis.NewScript(keepClaimLua)

//go:embed renewlease.lua
var renewLeaseLua string

var renewLeaseScript = redis.NewScript(renewLeaseLua)

//go:embed alive.lua
var aliveLua string

var aliveScript = redis.NewScript(aliveLua)

//go:embed beat.lua
var beatLua string

var beatScript = redis.NewScript(beatLua)

//go:embed stopped.lua
var stoppedLua string

var stoppedScript = redis.NewScript(stoppedLua)

// NotifyShards is the number of notification channels; a process
// subscribes only to the shards of the games it streams.
const NotifyShards = 64

// Config tunes the store.
type Config struct {
	// Prefix is prepended to every key (tests isolate themselves with it).
	Prefix string
	// LiveTTL is how long an unfinished game is kept after its last
	// change by a player or its clock (presence changes do not count);
	// Retention how long a finished one stays readable.
	LiveTTL   time.Duration
	Retention time.Duration
	// AutoPipeline sends commits (and probes) through go-redis'
	// autopipeliner, which batches the commands of concurrent requests
	// into shared round trips.
	AutoPipeline bool
	// Replication holds back every acknowledgement until replicas have
	// the commit; it cannot be combined with AutoPipeline, whose batches
	// share connections.
	Replication redisx.Replication
}

// Store reads and commits games.
type Store struct {
	rdb redis.UniversalClient
	// writes carries the commits and probes: rdb itself, or its
	// autopipeliner.
	writes writer
	cfg    Config
}

// writer is what commits and probes need from Redis.
type writer interface {
	redis.Scripter
}

// autoPipeline is the batching tested with the game load test: batches of
// up to 300 commands, up to 16 in flight, in any order (each caller waits
// for its own answer; commands of one game never share a batch, since a
// process runs them one at a time).
var autoPipeline = redis.AutoPipelineOptions{MaxBatchSize: 300, MaxConcurrentBatches: 16, Unordered: true}

// New returns a store.
func New(rdb redis.UniversalClient, cfg Config) (*Store, error) {
	if err := cfg.Replication.Validate(); err != nil {
		return nil, err
	}
	if cfg.AutoPipeline && cfg.Replication.Replicas > 0 {
		return nil, errors.New("waiting for replicas cannot be combined with the autopipeline")
	}
	s := &Store{rdb: rdb, writes: rdb, cfg: cfg}
	if !cfg.AutoPipeline {
		return s, nil
	}
	opts := autoPipeline
	var err error
	switch c := rdb.(type) {
	case *redis.Client:
		s.writes, err = c.AutoPipelineWithOptions(&opts)
	case *redis.ClusterClient:
		s.writes, err = c.AutoPipelineWithOptions(&opts)
	default:
		err = fmt.Errorf("not available for a %T", rdb)
	}
	if err != nil {
		return nil, fmt.Errorf("redis autopipeline: %w", err)
	}
	return s, nil
}

func (s *Store) stateKey(id string) string  { return s.cfg.Prefix + "{g:" + id + "}" }
func (s *Store) eventsKey(id string) string { return s.cfg.Prefix + "{g:" + id + "}:e" }
func (s *Store) movesKey(id string) string  { return s.cfg.Prefix + "{g:" + id + "}:m" }

// reqField is the state hash's field remembering a request's response.
func reqField(requestID string) string { return "r:" + requestID }

// Channel is the notification channel of a game's shard.
func (s *Store) Channel(id string) string { return s.ShardChannel(Shard(id)) }

// ShardChannel is the notification channel of a shard.
func (s *Store) ShardChannel(shard int) string { return s.cfg.Prefix + "gev:" + strconv.Itoa(shard) }

// Shard is the notification shard of a game.
func Shard(id string) int { return int(crc32.ChecksumIEEE([]byte(id)) % NotifyShards) }

// Loaded is a game as read, with the server time of the read.
type Loaded struct {
	// State is nil when Previous is set.
	State *model.State
	// Previous is the stored response of the request id, if it was seen.
	Previous []byte
	// Now is Redis' TIME: every process agrees on it.
	Now time.Time
	// Unconfirmed: the game's latest commit is not known to be held by
	// replicas (Config.Replication only); Confirm it before showing it.
	Unconfirmed bool
	// RequestIDs are the request fields the game remembers answers under
	// (LoadWithRequestIDs only; nil otherwise).
	RequestIDs []string
}

// Load reads a game, the answer already given to requestID (if any) and
// the server time, in one round trip.
func (s *Store) Load(ctx context.Context, id, requestID string) (Loaded, error) {
	return s.load(ctx, id, requestID, true, false)
}

// LoadWithRequestIDs is Load that also lists every request field the game
// remembers an answer under (a read that grows with the game's commands),
// in the same round trip.
func (s *Store) LoadWithRequestIDs(ctx context.Context, id, requestID string) (Loaded, error) {
	return s.load(ctx, id, requestID, true, true)
}

// LoadHead reads a game without its moves (State.Moves is nil): enough to
// check access and the version, at a cost that does not grow with the
// game, for streams that (re)connect without asking for a snapshot.
func (s *Store) LoadHead(ctx context.Context, id string) (Loaded, error) {
	return s.load(ctx, id, "", false, false)
}

func (s *Store) load(ctx context.Context, id, requestID string, withMoves, withIDs bool) (Loaded, error) {
	pipe := s.rdb.Pipeline()
	r := s.queueRead(ctx, pipe, id, requestID, withMoves)
	var fields *redis.StringSliceCmd
	if withIDs {
		fields = pipe.HKeys(ctx, s.stateKey(id))
	}
	tm := pipe.Time(ctx)
	if _, err := pipe.Exec(ctx); err != nil {
		return Loaded{}, fmt.Errorf("load game %s: %w", id, err)
	}
	now, err := tm.Result()
	if err != nil {
		return Loaded{}, fmt.Errorf("redis time: %w", err)
	}
	l, err := r.decode(now)
	if err != nil || fields == nil || l.State == nil {
		return l, err
	}
	l.RequestIDs = []string{}
	for _, f := range fields.Val() {
		if id, ok := strings.CutPrefix(f, reqField("")); ok {
			l.RequestIDs = append(l.RequestIDs, id)
		}
	}
	return l, nil
}

// LoadMany reads games with their moves and the server time in one round
// trip (a pipeline, which a cluster client splits by slot). A game not
// found has a nil State.
func (s *Store) LoadMany(ctx context.Context, ids []string) ([]Loaded, error) {
	pipe := s.rdb.Pipeline()
	reads := make([]read, len(ids))
	for i, id := range ids {
		reads[i] = s.queueRead(ctx, pipe, id, "", true)
	}
	tm := pipe.Time(ctx)
	// A game not found is an empty reply, not an error: Exec fails only
	// for Redis itself.
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("load %d games: %w", len(ids), err)
	}
	now, err := tm.Result()
	if err != nil {
		return nil, fmt.Errorf("redis time: %w", err)
	}
	out := make([]Loaded, len(ids))
	for i, r := range reads {
		l, err := r.decode(now)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		out[i] = l
	}
	return out, nil
}

// read is one game's reads, queued on a pipeline.
type read struct {
	id, requestID string
	waits         bool
	// got holds the state's fields read alone; withMoves the fields and
	// the moves, read together (read.lua).
	got       *redis.SliceCmd
	withMoves *redis.Cmd
}

func (s *Store) queueRead(ctx context.Context, pipe redis.Pipeliner, id, requestID string, withMoves bool) read {
	fields := []string{"s", "x"}
	if requestID != "" {
		fields = append(fields, reqField(requestID))
	}
	if s.Waits() {
		fields = append(fields, "v", "c")
	}
	r := read{id: id, requestID: requestID, waits: s.Waits()}
	if !withMoves {
		r.got = pipe.HMGet(ctx, s.stateKey(id), fields...)
		return r
	}
	args := make([]any, len(fields))
	for i, f := range fields {
		args[i] = f
	}
	// Sent whole, not by its hash: a pipeline cannot fall back on a
	// server that lost its scripts (restarted, failed over).
	r.withMoves = readScript.Eval(ctx, pipe, []string{s.stateKey(id), s.movesKey(id)}, args...)
	return r
}

// replies are the state's fields read, and the moves (nil when not read).
func (r read) replies() (vals []any, moves []string, err error) {
	if r.withMoves == nil {
		return r.got.Val(), nil, nil
	}
	both, err := r.withMoves.Slice()
	if err != nil {
		return nil, nil, fmt.Errorf("read game %s: %w", r.id, err)
	}
	if len(both) != 2 {
		return nil, nil, fmt.Errorf("read game %s: unexpected reply %v", r.id, both)
	}
	vals, ok := both[0].([]any)
	recs, ok2 := both[1].([]any)
	if !ok || !ok2 {
		return nil, nil, fmt.Errorf("read game %s: unexpected reply %v", r.id, both)
	}
	moves = make([]string, len(recs))
	for i, rec := range recs {
		if moves[i], ok = rec.(string); !ok {
			return nil, nil, fmt.Errorf("read game %s: move %d is %T", r.id, i+1, rec)
		}
	}
	return vals, moves, nil
}

// decode makes a Loaded of the replies to r, the server time being now.
func (r read) decode(now time.Time) (Loaded, error) {
	out := Loaded{Now: now}
	vals, recs, err := r.replies()
	if err != nil {
		return Loaded{}, err
	}
	if r.requestID != "" {
		if prev, ok := vals[2].(string); ok {
			out.Previous = []byte(prev)
		}
	}
	if r.waits {
		v, _ := vals[len(vals)-2].(string)
		c, _ := vals[len(vals)-1].(string)
		out.Unconfirmed = v != c
	}
	raw, ok := vals[0].(string)
	if !ok {
		return out, ErrNotFound
	}
	if out.Previous != nil {
		// A retry gets its first answer; the state, whose decoding grows
		// with the game, is not needed.
		return out, nil
	}
	var state model.State
	if err := json.Unmarshal([]byte(raw), &state); err != nil {
		return Loaded{}, fmt.Errorf("decode game %s: %w", r.id, err)
	}
	held, _ := vals[1].(string)
	state.Held = hold(held)
	if r.withMoves == nil {
		out.State = &state
		return out, nil
	}
	state.Moves = make([]model.MoveRec, len(recs))
	for i, rec := range recs {
		if err := json.Unmarshal([]byte(rec), &state.Moves[i]); err != nil {
			return Loaded{}, fmt.Errorf("decode move %d of game %s: %w", i+1, r.id, err)
		}
	}
	out.State = &state
	return out, nil
}

// HoldExcusedAfter is the least hold of a commit, from its judgment to
// its landing, that the turn it began is excused (model.State.Held): as
// long as a ping takes to count as an outage.
const HoldExcusedAfter = time.Second

// hold reads a commit's hold as the commit script writes it: the turn's
// start and the hold in ms, "start:held". None when "", or when damaged:
// it excuses nothing rather than make the game unreadable.
func hold(v string) model.TurnHold {
	start, held, _ := strings.Cut(v, ":")
	s, err1 := strconv.ParseInt(start, 10, 64)
	h, err2 := strconv.ParseInt(held, 10, 64)
	if err1 != nil || err2 != nil || h < 0 {
		return model.TurnHold{}
	}
	return model.TurnHold{TurnStartMs: s, Ms: h}
}

// Outcome says how a commit went.
type Outcome int

const (
	// Committed: the change is stored.
	Committed Outcome = iota
	// Duplicate: the request id was already answered; Previous holds it.
	Duplicate
	// Conflict: the version moved on.
	Conflict
)

// Result of a commit.
type Result struct {
	Outcome  Outcome
	Previous []byte
	// Held is the hold the commit recorded for the turn it began
	// (model.State.Held); zero when under HoldExcusedAfter, or none began.
	Held model.TurnHold
}

// Commit stores ch if the game is still as prev left it (nil: the game
// must not exist yet). resp is remembered under requestID when both are
// set.
//
// The expiry is extended only when it is due, not on every move: an
// unfinished game's keys expire LiveTTL plus a slack of LiveTTL/64 after
// the last extension, and the next commit more than the slack after that
// extension extends it again, so a game is always kept at least LiveTTL
// after its last change (presence changes aside, which extend nothing).
// A game with a deadline to come (a clock, a first move or a formation
// awaited) is kept at least LiveTTL past that deadline too, which ends it
// or moves it on: a --live-ttl shorter than a turn may take must not
// delete a game in the middle of that turn. A game that finishes gets
// Retention at once.
func (s *Store) Commit(ctx context.Context, prev *model.State, ch model.Change, requestID string, resp []byte, now time.Time) (Result, error) {
	if err := Writable(prev); err != nil {
		return Result{}, err
	}
	id := ch.State.ID
	var prevVersion uint64
	prevMoves, prevStamp, prevLogged := 0, "", ""
	if prev != nil {
		prevVersion, prevMoves, prevStamp, prevLogged = prev.Version, len(prev.Moves), prev.Stamp, prev.LogStamp
	}
	// The compare-and-set tells commits apart by their stamps.
	if ch.State.Stamp == "" || ch.State.Stamp == prevStamp {
		return Result{}, fmt.Errorf("commit game %s: the change is not sealed (model.Seal)", id)
	}
	if len(ch.Events) == 0 {
		ch.State.LogStamp = prevLogged
	}
	var expiry time.Duration
	switch slack := s.cfg.LiveTTL / 64; {
	case ch.State.Status.Finished():
		expiry = s.cfg.Retention
	case ch.Presence:
		// Streams opening and closing are no play: a game nobody moves in
		// expires even while a client keeps reconnecting to it.
	default:
		want := now.Add(s.cfg.LiveTTL + slack)
		if ch.State.WakeMs > 0 {
			want = later(want, time.UnixMilli(ch.State.WakeMs).Add(s.cfg.LiveTTL+slack))
		}
		kept := time.UnixMilli(ch.State.KeptUntilMs)
		if ch.State.KeptUntilMs == 0 {
			kept = time.UnixMilli(ch.State.ExpiryExtendedMs).Add(s.cfg.LiveTTL + slack)
		}
		if want.Sub(kept) >= slack {
			expiry = want.Sub(now)
			ch.State.ExpiryExtendedMs, ch.State.KeptUntilMs = now.UnixMilli(), want.UnixMilli()
		}
	}
	state, err := json.Marshal(ch.State)
	if err != nil {
		return Result{}, fmt.Errorf("encode game %s: %w", id, err)
	}
	field := ""
	if requestID != "" {
		field = reqField(requestID)
	}
	// Moves are only ever appended or, by an undo, cut back, so the new
	// list is the old one's first min(old, new) moves plus the rest. An
	// undo also rewrites the last move it keeps, which shows the clocks
	// the undo left (model.Undo), so that one is sent again.
	keep := -1
	moves := ch.State.Moves
	from := prevMoves
	if len(moves) < prevMoves {
		from = max(len(moves)-1, 0)
		keep = from
	}
	added := moves[from:]
	began := ""
	if start, _, ok := model.Waiting(ch.State); ok && start == now.UnixMilli() {
		began = strconv.FormatInt(start, 10)
	}
	args := make([]any, 0, 14+len(added)+len(ch.Events))
	args = append(args, strconv.FormatUint(prevVersion, 10), strconv.FormatUint(ch.State.Version, 10), state,
		field, resp, expiry.Milliseconds(), s.Channel(id), nil, keep, len(added), prevStamp, ch.State.Stamp,
		began, HoldExcusedAfter.Milliseconds())
	for i := range added {
		b, err := json.Marshal(&added[i])
		if err != nil {
			return Result{}, fmt.Errorf("encode move of game %s: %w", id, err)
		}
		args = append(args, b)
	}
	note := []byte(id + "\x00")
	for i, e := range ch.Events {
		b, err := proto.Marshal(e)
		if err != nil {
			return Result{}, fmt.Errorf("encode event of game %s: %w", id, err)
		}
		b = MarkEvent(b, ch.State.Stamp, prevLogged, i == 0)
		args = append(args, b)
		note = binary.AppendUvarint(note, uint64(len(b)))
		note = append(note, b...)
	}
	// The notification carries the events themselves, so the streams of
	// this game in every process get them without reading the log.
	args[7] = note
	keys := []string{s.stateKey(id), s.eventsKey(id), s.movesKey(id)}
	var res []any
	if !s.Waits() {
		res, err = commitScript.Run(ctx, s.writes, keys, args...).Slice()
	} else {
		args[6] = "" // published below, once confirmed
		err = s.cfg.Replication.Write(ctx, s.rdb, keys[0], func(c redis.Cmdable) (err error) {
			res, err = commitScript.Run(ctx, c, keys, args...).Slice()
			return err
		})
		if errors.Is(err, redisx.ErrNotReplicated) && len(res) > 0 && res[0] == "conflict" {
			err = nil // nothing was written, and the caller starts over
		}
	}
	if err != nil {
		return Result{}, fmt.Errorf("commit game %s: %w", id, err)
	}
	kind, _ := res[0].(string)
	switch kind {
	case "ok":
		held := ""
		if len(res) > 1 {
			held, _ = res[1].(string)
		}
		if s.Waits() {
			// Not acknowledged if this fails: the retry confirms the commit
			// again and has the streams read the log.
			// A commit without events (who holds a connected seat, a
			// wake-up) has nothing for the streams: a notification would
			// have every stream of the game read the log for nothing.
			channel := s.Channel(id)
			if len(ch.Events) == 0 {
				channel = ""
			}
			seen, err := s.confirmed(ctx, id, ch.State.Version, channel, note)
			if err != nil {
				return Result{}, err
			}
			if seen != "" {
				held = seen
			}
		}
		return Result{Outcome: Committed, Held: hold(held)}, nil
	case "dup":
		if s.Waits() {
			v, _ := res[2].(string)
			n, _ := strconv.ParseUint(v, 10, 64)
			if _, err := s.confirmed(ctx, id, n, s.Channel(id), []byte(id+"\x00")); err != nil {
				return Result{}, err
			}
		}
		b, _ := res[1].(string)
		return Result{Outcome: Duplicate, Previous: []byte(b)}, nil
	case "conflict":
		return Result{Outcome: Conflict}, nil
	}
	return Result{}, fmt.Errorf("commit game %s: unexpected script answer %v", id, res)
}

// Waits reports whether commits wait for replicas (Config.Replication).
func (s *Store) Waits() bool { return s.cfg.Replication.Replicas > 0 }

// Confirm waits until replicas hold everything written to game id so far
// (Config.Replication; without it, it does nothing), then has the game's
// streams read its log. A retry answered with a remembered answer
// confirms it first: the commit that wrote it may have failed its own
// wait, and published nothing.
//
// It returns the hold recorded for the last commit that began a turn, by
// this confirmation or an earlier one (confirmed.lua): a state read
// before the confirmation may lack it.
func (s *Store) Confirm(ctx context.Context, id string) (model.TurnHold, error) {
	if !s.Waits() {
		return model.TurnHold{}, nil
	}
	var v uint64
	err := s.cfg.Replication.Write(ctx, s.rdb, s.stateKey(id), func(c redis.Cmdable) error {
		n, err := confirmScript.Run(ctx, c, []string{s.stateKey(id)}).Int64()
		v = uint64(max(n, 0))
		return err
	})
	if err != nil {
		return model.TurnHold{}, fmt.Errorf("confirm game %s: %w", id, err)
	}
	if v == 0 {
		return model.TurnHold{}, nil // no such game
	}
	// A notification without events has the streams read the log: a
	// commit whose wait failed published nothing, and once confirmed its
	// events are found there, and nowhere else if it was the game's last.
	held, err := s.confirmed(ctx, id, v, s.Channel(id), []byte(id+"\x00"))
	return hold(held), err
}

// confirmed records that replicas hold game id up to version v, which
// lets reads show it, and then publishes note on channel (unless "").
// It returns the hold recorded, as the commit script writes it, for the
// last commit up to v that began a turn, by this confirmation or an
// earlier one ("" when none).
func (s *Store) confirmed(ctx context.Context, id string, v uint64, channel string, note []byte) (string, error) {
	held, err := confirmedScript.Run(ctx, s.rdb, []string{s.stateKey(id)}, v, channel, note, HoldExcusedAfter.Milliseconds()).Text()
	if err != nil {
		return "", fmt.Errorf("record confirmation of game %s: %w", id, err)
	}
	return held, nil
}

// Events returns up to count events with versions after `after`, in
// order, in their wire form. An empty answer means none yet (or an
// unknown game).
func (s *Store) Events(ctx context.Context, id string, after uint64, count int64) ([][]byte, error) {
	from := strconv.FormatUint(after+1, 10) + "-0"
	var msgs []redis.XMessage
	var err error
	if s.Waits() {
		msgs, err = s.confirmedEvents(ctx, id, from, count)
	} else {
		msgs, err = s.rdb.XRangeN(ctx, s.eventsKey(id), from, "+", count).Result()
	}
	if err != nil {
		return nil, fmt.Errorf("read events of game %s: %w", id, err)
	}
	out := make([][]byte, 0, len(msgs))
	for _, m := range msgs {
		raw, ok := m.Values["e"].(string)
		if !ok {
			return nil, fmt.Errorf("event %s of game %s has no body", m.ID, id)
		}
		out = append(out, []byte(raw))
	}
	return out, nil
}

// confirmedEvents reads the events that replicas are known to hold:
// those after the confirmed version wait for their confirmation, whose
// notification brings them.
func (s *Store) confirmedEvents(ctx context.Context, id, from string, count int64) ([]redis.XMessage, error) {
	pipe := s.rdb.Pipeline()
	c := pipe.HGet(ctx, s.stateKey(id), "c")
	xr := pipe.XRangeN(ctx, s.eventsKey(id), from, "+", count)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	confirmed, _ := strconv.ParseUint(c.Val(), 10, 64)
	msgs := xr.Val()
	for i, m := range msgs {
		v, _, _ := strings.Cut(m.ID, "-")
		if n, _ := strconv.ParseUint(v, 10, 64); n > confirmed {
			return msgs[:i], nil
		}
	}
	return msgs, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Kept reports whether st, as this process committed it, is certainly
// still stored at now: its keys live at least LiveTTL past the last
// extension of their expiry, unless another process finished the game
// since, which leaves them Retention.
func (s *Store) Kept(st *model.State, now time.Time) bool {
	return st.ExpiryExtendedMs != 0 && now.Before(time.UnixMilli(st.ExpiryExtendedMs).Add(min(s.cfg.LiveTTL, s.cfg.Retention)))
}

// Version reads a game's version alone, or ErrNotFound: the version its
// events may be read up to (Events), so while replicas have yet to confirm
// a commit, the version before it.
func (s *Store) Version(ctx context.Context, id string) (uint64, error) {
	h, err := s.Versions(ctx, id)
	return h.Shown, err
}

// Fields a commit appends to each event's wire form, after those the
// model set: EventStampField holds the stamp of the commit that made the
// event (Event.commit), and EventAfterField, on a
// commit's first event, that of the last commit before it that logged
// events ("" when not known). A stream checks that each event follows the
// one it sent last: should Redis lose a commit that a stream had sent, and
// the game go on from before it, the stream tells the new history from the
// one it sent. Streams strip the second (the Event proto reserves it).
const (
	EventStampField = 1000
	EventAfterField = 1001
)

// MarkEvent appends to an event's wire form the stamp of the commit that
// made it and, on the commit's first event, that of the last commit
// before it that logged events ("" when not known).
func MarkEvent(b []byte, stamp, after string, first bool) []byte {
	b = protowire.AppendTag(b, EventStampField, protowire.BytesType)
	b = protowire.AppendString(b, stamp)
	if first {
		b = protowire.AppendTag(b, EventAfterField, protowire.BytesType)
		b = protowire.AppendString(b, after)
	}
	return b
}

// Stamp returns the stamp of the commit that stored the game's state
// (model.State.Stamp), ErrNotFound when there is no game.
func (s *Store) Stamp(ctx context.Context, id string) (string, error) {
	stamp, err := s.rdb.HGet(ctx, s.stateKey(id), "n").Result()
	if errors.Is(err, redis.Nil) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("stamp of game %s: %w", id, err)
	}
	return stamp, nil
}

// Head is where a game is: the version readers may be shown, and its
// latest commit, confirmed by replicas or not, with the stamp of the last
// commit that logged events (model.State.LogStamp; "" when not known).
type Head struct {
	Shown, Committed uint64
	LogStamp         string
}

// Versions reads the game's Head.
func (s *Store) Versions(ctx context.Context, id string) (Head, error) {
	got, err := s.rdb.HMGet(ctx, s.stateKey(id), "v", "c", "h").Result()
	if err != nil {
		return Head{}, fmt.Errorf("version of game %s: %w", id, err)
	}
	if got[0] == nil {
		return Head{}, ErrNotFound
	}
	parse := func(field any) (uint64, error) {
		str, _ := field.(string)
		if str == "" {
			return 0, nil
		}
		v, err := strconv.ParseUint(str, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("version of game %s: %w", id, err)
		}
		return v, nil
	}
	var h Head
	if h.Committed, err = parse(got[0]); err != nil {
		return Head{}, err
	}
	h.Shown = h.Committed
	if s.Waits() {
		if h.Shown, err = parse(got[1]); err != nil {
			return Head{}, err
		}
	}
	h.LogStamp, _ = got[2].(string)
	return h, nil
}

// Keys lists the keys of a game, for tests and operators.
func (s *Store) Keys(id string) []string {
	return []string{s.stateKey(id), s.eventsKey(id), s.movesKey(id)}
}

// probeTTL is how long a probe counter outlives its first probe.
const probeTTL = time.Hour

// Time reads Redis' TIME, the clock every process goes by.
func (s *Store) Time(ctx context.Context) (time.Time, error) {
	t, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("redis time: %w", err)
	}
	return t, nil
}

// Clustered reports whether Redis is a cluster.
func (s *Store) Clustered() bool {
	_, ok := s.rdb.(*redis.ClusterClient)
	return ok
}

// Writable asks Redis whether it takes writes, writing nothing: on a
// cluster every master (redisx.Writable), since the games of a slot whose
// master is out of reach, or refuses writes, can make no move.
func (s *Store) Writable(ctx context.Context) error { return redisx.Writable(ctx, s.rdb) }

// probeScript counts a probe, and gives the counter its lifetime at its
// first: in one step, so that a lost answer (the client then sending the
// script again, or the caller gone) cannot leave the counter without one;
// every later probe stays one write.
var probeScript = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return n`)

// Probe increments a counter (the load test's floor: one write).
func (s *Store) Probe(ctx context.Context, key string) (uint64, error) {
	k := s.cfg.Prefix + "probe:{" + key + "}"
	n, err := probeScript.Run(ctx, s.writes, []string{k}, probeTTL.Milliseconds()).Int64()
	if err != nil {
		return 0, fmt.Errorf("probe %s: %w", key, err)
	}
	return uint64(n), nil
}

// NotificationGame is the game a commit notification is about.
func NotificationGame(payload string) string {
	id, _, _ := strings.Cut(payload, "\x00")
	return id
}

// NotificationEvents reads the events, in their wire form, that a commit
// notification carries.
func NotificationEvents(payload string) ([][]byte, error) {
	id, rest, ok := strings.Cut(payload, "\x00")
	if !ok {
		return nil, fmt.Errorf("notification without events")
	}
	b := []byte(rest)
	var evs [][]byte
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, fmt.Errorf("notification of game %s is truncated", id)
		}
		evs = append(evs, b[k:k+int(n)])
		b = b[k+int(n):]
	}
	return evs, nil
}

// Beat records that a process of the service lives, for keep, and
// returns the epoch of the service's data: the one Redis holds, or a
// fresh one, which the call writes, when it holds none (the service's
// first beat, or Redis lost its data: restarted without persistence,
// flushed). So every process that beat before, not only the first to
// beat after the loss, finds another epoch than its last. The key has the
// hash tag {gamed}. It is not the "{gamed}:beat" of releases before
// epochs, which set that key to 1 at every beat: beside one of those, in a
// rollout or a rollback, an epoch there was overwritten every second, and
// this release's processes took that for a loss of Redis' data.
func (s *Store) Beat(ctx context.Context, keep time.Duration) (epoch string, err error) {
	epoch, err = beatScript.Run(ctx, s.rdb, []string{s.cfg.Prefix + "{gamed}:epoch"}, strconv.FormatUint(rand.Uint64(), 36), keep.Milliseconds()).Text()
	if err != nil {
		return "", fmt.Errorf("beat: %w", err)
	}
	return epoch, nil
}
