package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/rules"
)

// A process that holds seat streams open is named in the games' states
// (model.Hold). So that a process that dies without recording its streams
// closing does not leave its seats connected forever, every process keeps
// a lease, and lists the games whose seats it holds:
//
//	{presence}:procs          sorted set: process id (or "claim:" and
//	                          the id), scored by the millisecond its
//	                          lease (or claim) runs out
//	{presence:<proc>}:games   set of the seats the process may hold, as
//	                          "<game id>|<side>" (ids never contain '|')
//	{presence}:silences       sorted set of the spans in which no process
//	                          held a lease, "<from ms>:<to ms>", scored by
//	                          their end
//	{presence}:stopped        the millisecond the last process to stop
//	                          cleanly stopped
//	{presence}:alive, :born   sorted sets: process id, scored by the
//	                          millisecond of its last (first) beat
//	{presence}:breaks         sorted set of the breaks in processes'
//	                          contact with Redis, "<proc>|<from>|<to>" (ms),
//	                          scored by their end
//
// A process renews its lease well before it runs out. Any process that
// finds a lease run out claims it (one claimant wins) and releases the
// seats of the games listed. The claim replaces the lease by a lease of
// the claimant's work, "claim:<proc>" in the same set, which Forget drops
// once everything is released: a claimant that dies midway leaves a claim
// that runs out, and another process claims it and finishes; one whose
// process came back is ended by that process's renewal, which holds its
// seats again.

func (s *Store) procsKey() string { return s.cfg.Prefix + "{presence}:procs" }

func (s *Store) heldKey(proc string) string { return s.cfg.Prefix + "{presence:" + proc + "}:games" }

// listingsKey counts proc's listings (Holding), beside its list.
func (s *Store) listingsKey(proc string) string {
	return s.cfg.Prefix + "{presence:" + proc + "}:listings"
}

// listingsKeep is how long a count of listings outlives its process's last
// listing, so that a release by a build that knows nothing of it (a
// rolling upgrade) leaves nothing for good; a release reads and compares
// it within far less.
const listingsKeep = 7 * 24 * time.Hour

func (s *Store) silencesKey() string { return s.cfg.Prefix + "{presence}:silences" }

func (s *Store) stoppedKey() string { return s.cfg.Prefix + "{presence}:stopped" }

func (s *Store) stopperKey() string { return s.cfg.Prefix + "{presence}:stopper" }

func (s *Store) aliveKey() string { return s.cfg.Prefix + "{presence}:alive" }

func (s *Store) bornKey() string { return s.cfg.Prefix + "{presence}:born" }

func (s *Store) breaksKey() string { return s.cfg.Prefix + "{presence}:breaks" }

// A process says it lives (Alive) every BeatEvery. One that has not for
// beatGrace is taken to have stopped serving then: it died, or lost Redis,
// and could commit nothing. Its lease, which outlives it by far, is for the
// seats it held, not for dating a silence.
const (
	BeatEvery = time.Second
	beatGrace = 2*BeatEvery + BeatEvery/2
	// beatsKept bounds the beats kept, newest first: more than the
	// processes of any deployment.
	beatsKept = 1024
)

// Alive records that proc, started at started, lives and reaches Redis,
// at Redis' time, and that it served nothing in the breaks in its contact
// with Redis broken (see Renew) that no renewal has recorded yet.
func (s *Store) Alive(ctx context.Context, proc string, started time.Time, broken []Break) error {
	args := breakArgs([]any{proc, SilencesKeptFor.Milliseconds(), beatsKept, started.UnixMilli()}, broken)
	if err := aliveScript.Run(ctx, s.rdb, []string{s.aliveKey(), s.bornKey(), s.breaksKey()}, args...).Err(); err != nil {
		return fmt.Errorf("beat of %s: %w", proc, err)
	}
	return nil
}

// Gone dates proc's last beat so that it served until at, when it
// stopped cleanly: the silence that may follow begins at its stop, not a
// beatGrace later.
func (s *Store) Gone(ctx context.Context, proc string, at time.Time) error {
	if err := s.rdb.ZAddXX(ctx, s.aliveKey(), redis.Z{Score: float64(at.Add(-beatGrace).UnixMilli()), Member: proc}).Err(); err != nil {
		return fmt.Errorf("forget the beat of %s: %w", proc, err)
	}
	return nil
}

// Silence is a span, in Unix milliseconds, in which no process of the
// service held a lease: every one was stopped, or cut off from Redis.
type Silence struct{ From, To int64 }

// Renewal is what a lease's renewal found.
type Renewal struct {
	// Fresh: the lease was not there (a new process, or one whose lease
	// ran out and was claimed), or a claim on it was, or this renewal
	// ran before, its answer lost (the client sent it again): the
	// process must hold its seats again, since a release may have let
	// some go.
	Fresh bool
	// Recorded are the silences this renewal found and recorded (none
	// when another process held a lease until now), one for each break in
	// the renewing process's contact at most.
	Recorded []Silence
	// Silences are those kept that end after the renewal's seen.
	Silences []Silence
}

// SilencesKept bounds the silences kept, newest first, and how long.
const (
	SilencesKept    = 64
	SilencesKeptFor = 7 * 24 * time.Hour
)

// breakArgs appends broken to a script's args as the scripts take them:
// for each break, when the process stopped serving and when it could again
// (0: not yet), in ms.
func breakArgs(args []any, broken []Break) []any {
	for _, b := range broken {
		args = append(args, b.Served.UnixMilli(), unixMilliOrZero(b.Resumed))
	}
	return args
}

// Break is a break in a process's contact with Redis that no renewal has
// been told of: the process served until Served, and could serve again
// from Resumed (zero: the contact under way, which began at the renewal's
// contact).
type Break struct{ Served, Resumed time.Time }

// Renew extends proc's lease to until. When no other process has beaten
// (Alive) for beatGrace, nor holds a lease without ever having beaten (a
// release before beats), and proc's own lease had run out, nobody served
// from then (or the last clean stop, Stopped) until now, or until contact
// if earlier, when proc's own unbroken contact with Redis began: the
// renewal records that silence; proc itself served until its lease ran
// out. When its contact broke since its last renewal, once or more
// (broken, oldest first), each break that nobody else served through is
// a silence of its own, from when proc stopped serving until it could
// again: proc served between them. It returns the silences that end after
// seen; any it cannot read (written by another release, say) are left out.
func (s *Store) Renew(ctx context.Context, proc string, until, now, contact time.Time, broken []Break, seen int64) (Renewal, error) {
	keys := []string{s.procsKey(), s.silencesKey(), s.stoppedKey(), s.aliveKey(), s.bornKey(), s.breaksKey(), s.stopperKey()}
	args := breakArgs([]any{proc, until.UnixMilli(), now.UnixMilli(),
		SilencesKeptFor.Milliseconds(), SilencesKept, seen, contact.UnixMilli(), beatGrace.Milliseconds(), beatsKept}, broken)
	raw, err := renewLeaseScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		return Renewal{}, fmt.Errorf("renew lease of %s: %w", proc, err)
	}
	if len(raw) < 2 {
		return Renewal{}, fmt.Errorf("renew lease of %s: answer %v is short", proc, raw)
	}
	fresh, _ := raw[0].(int64)
	r := Renewal{Fresh: fresh >= 1}
	rec, _ := raw[1].(string)
	for _, text := range strings.Fields(rec) {
		if sl, ok := parseSilence(text); ok {
			r.Recorded = append(r.Recorded, sl)
		}
	}
	for _, v := range raw[2:] {
		text, _ := v.(string)
		if sl, ok := parseSilence(text); ok {
			r.Silences = append(r.Silences, sl)
		}
	}
	return r, nil
}

func parseSilence(text string) (Silence, bool) {
	from, to, ok := strings.Cut(text, ":")
	f, ferr := strconv.ParseInt(from, 10, 64)
	t, terr := strconv.ParseInt(to, 10, 64)
	if !ok || ferr != nil || terr != nil || t <= f {
		return Silence{}, false
	}
	return Silence{From: f, To: t}, true
}

// EndLease lets proc's lease run out now, for another process to release
// the seats it still lists.
func (s *Store) EndLease(ctx context.Context, proc string) error {
	if err := s.rdb.ZAdd(ctx, s.procsKey(), redis.Z{Score: 0, Member: proc}).Err(); err != nil {
		return fmt.Errorf("end lease of %s: %w", proc, err)
	}
	return nil
}

// Stopped records that proc stopped cleanly at: should it be the last,
// the silence that follows begins then (see Renew).
func (s *Store) Stopped(ctx context.Context, proc string, at time.Time) error {
	if err := stoppedScript.Run(ctx, s.rdb, []string{s.stoppedKey(), s.stopperKey()}, at.UnixMilli(), SilencesKeptFor.Milliseconds(), proc).Err(); err != nil {
		return fmt.Errorf("record a stop: %w", err)
	}
	return nil
}

// Expired lists up to limit processes whose lease ran out before now.
func (s *Store) Expired(ctx context.Context, now time.Time, limit int64) ([]string, error) {
	procs, err := s.rdb.ZRangeByScore(ctx, s.procsKey(), &redis.ZRangeBy{Min: "-inf", Max: "(" + strconv.FormatInt(now.UnixMilli(), 10), Count: limit}).Result()
	if err != nil {
		return nil, fmt.Errorf("expired leases: %w", err)
	}
	return procs, nil
}

// Claim takes an entry that Expired listed, so that only one process
// releases another's seats, until the claim itself runs out at until. It
// returns the process whose seats to release, or "" when another process
// claimed the entry first or the process renewed its lease.
func (s *Store) Claim(ctx context.Context, entry string, now, until time.Time) (string, error) {
	proc, err := claimLeaseScript.Run(ctx, s.rdb, []string{s.procsKey()}, entry, now.UnixMilli(), until.UnixMilli()).Text()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("claim lease %s: %w", entry, err)
	}
	return proc, nil
}

// Unclaim lets the claim on proc's lease run out now, so that a later
// round, here or elsewhere, takes up a release that failed.
func (s *Store) Unclaim(ctx context.Context, proc string) error {
	if err := s.rdb.ZAdd(ctx, s.procsKey(), redis.Z{Score: 0, Member: ClaimOf(proc)}).Err(); err != nil {
		return fmt.Errorf("unclaim lease of %s: %w", proc, err)
	}
	return nil
}

// KeepClaim extends the claim on proc's lease to until while its release
// goes on; false: the claim is gone and proc not back (another release
// ended it).
func (s *Store) KeepClaim(ctx context.Context, proc string, until time.Time) (bool, error) {
	on, err := keepClaimScript.Run(ctx, s.rdb, []string{s.procsKey()}, proc, until.UnixMilli()).Int()
	if err != nil {
		return false, fmt.Errorf("keep the claim on %s: %w", proc, err)
	}
	return on == 1, nil
}

// ClaimOf names the claim on proc's lease among the leases.
func ClaimOf(proc string) string { return "claim:" + proc }

// Held lists the games whose seats proc may hold.
func (s *Store) Held(ctx context.Context, proc string) ([]string, error) {
	listed, err := s.Listing(ctx, proc)
	return GamesOf(listed.Seats), err
}

// Listed is a process's list as a release read it: the seats it may
// hold, with its count of listings then, by which the release's end
// (Released) tells whether the process listed a seat since.
type Listed struct {
	Seats []string
	count string
}

// Listing reads proc's list as stored, with its count of listings.
func (s *Store) Listing(ctx context.Context, proc string) (Listed, error) {
	var seats *redis.StringSliceCmd
	var count *redis.StringCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		seats = p.SMembers(ctx, s.heldKey(proc))
		count = p.Get(ctx, s.listingsKey(proc))
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Listed{}, fmt.Errorf("games held by %s: %w", proc, err)
	}
	return Listed{Seats: seats.Val(), count: count.Val()}, nil
}

// GamesOf lists the games of seats, as Listing gives them.
func GamesOf(seats []string) []string {
	ids := make([]string, 0, len(seats))
	for _, seat := range seats {
		if i := strings.LastIndexByte(seat, '|'); i > 0 && !slices.Contains(ids, seat[:i]) {
			ids = append(ids, seat[:i])
		}
	}
	return ids
}

func heldSeat(id string, side rules.Side) string { return id + "|" + strconv.Itoa(int(side)) }

// Holding lists a seat among those proc may hold; call it before the
// commit that names proc its holder, so that a crash between the two
// leaves at worst a seat to release that proc does not hold. A proc found
// without a lease (its lease run out and its release ended after counting
// the list, or a proc not yet renewed) gets a claim on it that runs out at
// until, standing in for the lease: proc's renewal before then holds its
// seats again, and should proc die, a later round releases this seat.
func (s *Store) Holding(ctx context.Context, proc, id string, side rules.Side, until time.Time) error {
	// Counted first: a release that reads the list and its count before
	// the count moves takes its seats off before this seat is added.
	if err := holdingScript.Run(ctx, s.rdb, []string{s.listingsKey(proc)}, listingsKeep.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("list a seat of game %s held by %s: %w", id, proc, err)
	}
	if err := s.rdb.SAdd(ctx, s.heldKey(proc), heldSeat(id, side)).Err(); err != nil {
		return fmt.Errorf("list a seat of game %s held by %s: %w", id, proc, err)
	}
	err := s.rdb.ZScore(ctx, s.procsKey(), proc).Err()
	if errors.Is(err, redis.Nil) {
		err = s.rdb.ZAddNX(ctx, s.procsKey(), redis.Z{Score: float64(until.UnixMilli()), Member: ClaimOf(proc)}).Err()
	}
	if err != nil {
		return fmt.Errorf("list a seat of game %s held by %s: %w", id, proc, err)
	}
	return nil
}

// NotHolding takes a seat off proc's list, after the commit that let go
// of it (or once the game is over).
func (s *Store) NotHolding(ctx context.Context, proc, id string, side rules.Side) error {
	if err := s.rdb.SRem(ctx, s.heldKey(proc), heldSeat(id, side)).Err(); err != nil {
		return fmt.Errorf("unlist a seat of game %s held by %s: %w", id, proc, err)
	}
	return nil
}

// Released forgets proc once another process has let go of every seat
// on listed, its list as read before, unless proc came back meanwhile:
// its lease and list are kept, and its next renewal holds its seats
// again. Only what was read is taken off the list, and put back should
// proc come back before the claim ends. Should proc have listed a seat
// since the read, even one the release read (closed and opened again),
// nothing is taken off its list and the claim is left run out, for a
// later round to read it again.
func (s *Store) Released(ctx context.Context, proc string, listed Listed) error {
	back, err := s.cameBack(ctx, proc, keepClaim)
	if err != nil || back {
		return err
	}
	args := make([]any, 0, 1+len(listed.Seats))
	args = append(args, listed.count)
	for _, seat := range listed.Seats {
		args = append(args, seat)
	}
	left, err := unlistScript.Run(ctx, s.rdb, []string{s.heldKey(proc), s.listingsKey(proc)}, args...).Int64()
	if err != nil {
		return fmt.Errorf("forget %s: %w", proc, err)
	}
	if left < 0 {
		_, err = s.cameBack(ctx, proc, runOutClaim)
		return err
	}
	if back, err = s.cameBack(ctx, proc, endClaim); err != nil {
		return err
	}
	if back {
		// It may have listed again a seat just taken off; one listed
		// that it does not hold releases nothing.
		return s.listing(ctx, proc, listed.Seats, s.rdb.SAdd)
	}
	// Counted once the claim is gone: a seat listed after this count
	// finds no lease, and Holding claims the lease itself.
	left, err = s.rdb.SCard(ctx, s.heldKey(proc)).Result()
	if err != nil || left == 0 {
		return err
	}
	_, err = s.cameBack(ctx, proc, runOutClaim)
	return err
}

// listing applies change (SADD, SREM) to proc's list with seats.
func (s *Store) listing(ctx context.Context, proc string, seats []string, change func(context.Context, string, ...any) *redis.IntCmd) error {
	if len(seats) == 0 {
		return nil
	}
	members := make([]any, len(seats))
	for i, seat := range seats {
		members[i] = seat
	}
	if err := change(ctx, s.heldKey(proc), members...).Err(); err != nil {
		return fmt.Errorf("forget %s: %w", proc, err)
	}
	return nil
}

// What cameBack does with the claim on a process's lease when the
// process did not come back (released.lua).
const (
	keepClaim   = ""
	endClaim    = "end"
	runOutClaim = "runout"
)

// cameBack reports whether proc renewed its lease after it was claimed,
// leaving the claim run out if so; else it does then with the claim.
func (s *Store) cameBack(ctx context.Context, proc, then string) (bool, error) {
	back, err := releasedScript.Run(ctx, s.rdb, []string{s.procsKey()}, proc, then).Int()
	if err != nil {
		return false, fmt.Errorf("forget %s: %w", proc, err)
	}
	return back == 1, nil
}

// Forget drops proc's lease and list: proc stops, with nothing left to
// release.
func (s *Store) Forget(ctx context.Context, proc string) error {
	if err := s.rdb.Del(ctx, s.heldKey(proc), s.listingsKey(proc)).Err(); err != nil {
		return fmt.Errorf("forget %s: %w", proc, err)
	}
	if err := s.rdb.ZRem(ctx, s.procsKey(), proc, ClaimOf(proc)).Err(); err != nil {
		return fmt.Errorf("forget %s: %w", proc, err)
	}
	return nil
}

// unixMilliOrZero is t in Unix milliseconds, 0 for the zero time.
func unixMilliOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
