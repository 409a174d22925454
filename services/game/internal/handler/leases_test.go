package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/grpc/metadata"

	"github.com/palacehq/palace/pkg/auth"
	"github.com/palacehq/palace/pkg/deadline"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/services/game/internal/hub"
	"github.com/palacehq/palace/services/game/internal/model"
	"github.com/palacehq/palace/services/game/internal/store"
)

// newRedisHandler is a Handler on the real Redis of the tests, its keys
// under a prefix of their own.
func newRedisHandler(t *testing.T) *Handler {
	t.Helper()
	ring, _, err := auth.KeyringFromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	return newRedisHandlerOn(t, redistest.Client(t), redistest.Prefix(t), ring)
}

// newRedisHandlerOn is a Handler on rdb with its keys under prefix,
// signing and verifying every credential with ring: handlers sharing a
// prefix and a ring are processes of one deployment.
func newRedisHandlerOn(t *testing.T, rdb redis.UniversalClient, prefix string, ring *auth.Keyring) *Handler {
	t.Helper()
	return newRedisHandlerWith(t, rdb, prefix, ring, nil)
}

// newRedisHandlerWith is newRedisHandlerOn with its config adjusted by
// edit.
func newRedisHandlerWith(t *testing.T, rdb redis.UniversalClient, prefix string, ring *auth.Keyring, edit func(*Config)) *Handler {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.New(rdb, store.Config{Prefix: prefix, LiveTTL: time.Hour, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := deadline.New(rdb, prefix, 4)
	if err != nil {
		t.Fatal(err)
	}
	hb := hub.New(context.Background(), rdb, log, hub.Config{Channel: st.ShardChannel, ShardOf: store.Shard, Decode: Notifications()})
	cfg := Config{PresenceGrace: time.Minute, SetupTime: time.Minute, FirstMoveTime: time.Minute, SeatTTL: time.Hour, Heartbeat: time.Second, ServiceKeys: ring}
	if edit != nil {
		edit(&cfg)
	}
	h, err := New(context.Background(), log, cfg, st, idx, hb, ring, noop.NewMeterProvider().Meter("test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Close(context.Background())
		_ = hb.Close()
	})
	return h
}

// newXiangqi creates a Xiangqi game through h, as a service does, and
// returns its id and the contexts of calls from its two seats.
func newXiangqi(t *testing.T, h *Handler) (id string, red, black context.Context) {
	t.Helper()
	return newXiangqiFor(t, h, "create")
}

// newXiangqiFor is newXiangqi for the creation request requestID: another
// one makes another game.
func newXiangqiFor(t *testing.T, h *Handler, requestID string) (id string, red, black context.Context) {
	t.Helper()
	ctx := t.Context()
	tok, err := auth.ServiceToken(h.cfg.ServiceKeys, "test", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	created, err := h.CreateGame(metadata.NewIncomingContext(ctx, metadata.Pairs(auth.ServiceHeader, tok)), &gamev1.CreateGameRequest{
		RequestId: requestID, Kind: commonv1.GameKind_GAME_KIND_XIANGQI,
		Seats: []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, PlayerId: "a"}, {Side: commonv1.Side_SIDE_SECOND, PlayerId: "b"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	as := map[commonv1.Side]context.Context{}
	for _, c := range created.GetCredentials() {
		as[c.GetSide()] = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+c.GetToken()))
	}
	return created.GetGameId(), as[commonv1.Side_SIDE_FIRST], as[commonv1.Side_SIDE_SECOND]
}

// holdsFirst reports whether h holds the first seat of game id, as Redis
// has it.
func holdsFirst(t *testing.T, h *Handler, id string) bool {
	t.Helper()
	l, err := h.store.LoadHead(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(l.State.Holders[rules.First], h.proc)
}

// TestLateClosingOfAReopenedSeatChangesNothing: a seat's stream closes and
// its held-back closing fires just as a new stream of the seat opens here,
// so both are recorded, and the opening reaches the game first (the
// closing was delayed behind the game's other commands). Holding a seat is
// idempotent, so the order they reach Redis cannot decide; what this
// process holds when the closing is committed must: the seat stays held.
func TestLateClosingOfAReopenedSeatChangesNothing(t *testing.T) {
	ctx := t.Context()
	h := newRedisHandler(t)
	id, _, _ := newXiangqi(t, h)
	held := func() bool { return holdsFirst(t, h, id) }
	h.presence.opened(ctx, id, rules.First)
	if !held() {
		t.Fatal("an opened seat stream does not hold the seat")
	}
	// The late closing of the seat's earlier stream.
	h.record(ctx, id, rules.First, -1, false)
	if !held() {
		t.Fatal("a closing recorded after the seat's stream reopened let the seat go")
	}
	// Once the stream does close, the seat is let go.
	h.presence.flush(ctx, 0)
	h.presence.closed(ctx, id, rules.First)
	if held() {
		t.Fatal("the seat is still held after its last stream closed")
	}
}

// TestClosingASeatOfAnExpiredGameForgetsIt: a game can expire while a
// stream of it is open. Its closing then has nothing to record: the seat
// is taken off this process's list at once, not retried for the life of
// the process.
func TestClosingASeatOfAnExpiredGameForgetsIt(t *testing.T) {
	ctx := t.Context()
	h := newRedisHandler(t)
	id, _, _ := newXiangqi(t, h)
	listed := func() bool {
		t.Helper()
		ids, err := h.store.Held(ctx, h.proc)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(ids, id)
	}
	h.presence.opened(ctx, id, rules.First)
	if !listed() {
		t.Fatal("an opened seat stream is not listed")
	}
	if err := redistest.Client(t).Del(ctx, h.store.Keys(id)...).Err(); err != nil {
		t.Fatal(err)
	}
	h.presence.closed(ctx, id, rules.First)
	h.presence.flush(ctx, 0)
	if listed() {
		t.Fatal("the seat of an expired game is still listed after its stream closed")
	}
	h.retryMu.Lock()
	defer h.retryMu.Unlock()
	if len(h.retry) != 0 {
		t.Fatalf("the closing is kept to be retried: %v", h.retry)
	}
}

// TestAnUnlistingLostToAnOutageIsDoneLater: a seat let go while Redis
// could not take it off the process's list is taken off at a later
// renewal, unless the seat is held again by then.
func TestAnUnlistingLostToAnOutageIsDoneLater(t *testing.T) {
	ring, _, err := auth.KeyringFromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	h := newRedisHandlerOn(t, redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1}), redistest.Prefix(t), ring)
	ctx := context.Background()
	heldAgain, _, _ := newXiangqi(t, h)
	for _, id := range []string{"let-go", heldAgain} {
		if err := h.store.Holding(ctx, h.proc, id, rules.First, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	proxy.Cut()
	h.unlist(ctx, "let-go", rules.First)
	h.unlist(ctx, heldAgain, rules.First)
	proxy.Restore()
	h.presence.opened(ctx, heldAgain, rules.First)
	h.retryPresence(ctx)
	if ids, err := h.store.Held(ctx, h.proc); err != nil || !slices.Equal(ids, []string{heldAgain}) {
		t.Fatalf("listed %v, %v; want only the seat held again", ids, err)
	}
}

// failListing makes the SADD that lists a seat on a process's presence
// list fail as a command to an unreachable Redis node does (on a Redis
// Cluster, the {presence:<proc>} slot and the {g:<id>} slot may live on
// different masters), while every other command goes through.
type failListing struct{ on *atomic.Bool }

func (f failListing) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f failListing) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.on.Load() && strings.EqualFold(cmd.Name(), "sadd") {
			err := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (f failListing) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestASeatIsHeldOnlyOnceListed: a seat stream opens while the process
// cannot list the seat on its presence list (on a Redis Cluster, the
// {presence:<proc>} slot and the game's may live on different masters).
// Holding it anyway would leave it connected for good if the process then
// died, since those who reap its lease release only what it listed; so
// the seat is held, listed first, by the retry at a later renewal, and
// released when the process's lease is reaped.
func TestASeatIsHeldOnlyOnceListed(t *testing.T) {
	ctx := t.Context()
	ring, _, err := auth.KeyringFromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	var failing atomic.Bool
	hooked := redis.NewClient(&redis.Options{Addr: redistest.Addr(t), MaxRetries: -1})
	hooked.AddHook(failListing{&failing})
	t.Cleanup(func() { _ = hooked.Close() })
	gone := newRedisHandlerOn(t, hooked, prefix, ring)
	reaper := newRedisHandlerOn(t, redistest.Client(t), prefix, ring)
	id, _, _ := newXiangqi(t, gone)

	failing.Store(true)
	gone.presence.opened(ctx, id, rules.First)
	failing.Store(false)
	if holdsFirst(t, gone, id) {
		t.Fatal("the seat is held though it could not be listed")
	}
	gone.retryPresence(ctx)
	if !holdsFirst(t, gone, id) {
		t.Fatal("the retry at the next renewal did not hold the seat")
	}
	if listed, err := reaper.store.Held(ctx, gone.proc); err != nil || !slices.Equal(listed, []string{id}) {
		t.Fatalf("listed %v, %v; want the game", listed, err)
	}
	// gone dies; a live process claims its lease and releases its seats.
	claimedBy(t, reaper, gone, time.Hour)
	if err := reaper.releaseAll(ctx, gone.proc); err != nil {
		t.Fatal(err)
	}
	l, err := reaper.store.LoadHead(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if h, n := l.State.Holders[rules.First], l.State.Connections[rules.First]; len(h) != 0 || n != 0 {
		t.Fatalf("after the dead process's lease was reaped, the seat has holders %v and %d connections", h, n)
	}
}

// TestReleaseGoesPastAGameItCannotWrite: the seats of a process whose lease
// ran out are released in every game that can be written, even when one
// cannot (a newer version stored it, during a rolling upgrade); the
// process is not forgotten, so that game is released by a later attempt.
func TestReleaseGoesPastAGameItCannotWrite(t *testing.T) {
	ctx := t.Context()
	gone, reaper, rdb, prefix := twoProcesses(t)
	newer, _, _ := newXiangqiFor(t, gone, "newer")
	plain, _, _ := newXiangqiFor(t, gone, "plain")
	for _, id := range []string{newer, plain} {
		gone.presence.opened(ctx, id, rules.First)
	}
	held := func(id string) bool {
		t.Helper()
		l, err := reaper.store.LoadHead(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(l.State.Holders[rules.First], gone.proc)
	}
	if !held(newer) || !held(plain) {
		t.Fatal("the seats are not held")
	}
	storedByANewerBuild(t, rdb, prefix, newer)
	claimedBy(t, reaper, gone, time.Hour)
	// The newer game is listed first (Redis keeps a small set in the order
	// it was added), so a release that stopped there would release none.
	if err := reaper.releaseAll(ctx, gone.proc); !errors.Is(err, store.ErrNewerFormat) {
		t.Fatalf("releaseAll: %v, want the newer game's refusal", err)
	}
	if held(plain) || !held(newer) {
		t.Fatalf("after the release, held: plain %v, newer %v; want only the newer game", held(plain), held(newer))
	}
	if games, err := reaper.store.Held(ctx, gone.proc); err != nil || !slices.Contains(games, newer) {
		t.Fatalf("the process's games %v (%v): want it remembered with the newer game", games, err)
	}
}

// storedByANewerBuild makes the game's last commit one of a newer build,
// which this one cannot write (a rolling upgrade).
func storedByANewerBuild(t *testing.T, rdb redis.UniversalClient, prefix, id string) {
	t.Helper()
	key := prefix + "{g:" + id + "}"
	raw, err := rdb.HGet(t.Context(), key, "s").Result()
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatal(err)
	}
	st["needs"], st["stamp"] = model.Format+1, "newer"
	b, _ := json.Marshal(st)
	if err := rdb.HSet(t.Context(), key, "s", b, "n", "newer").Err(); err != nil {
		t.Fatal(err)
	}
}

// afterFirstRehold waits for h's first lease round to have held its
// seats again (none), so that a test's own rounds are the only ones.
func afterFirstRehold(h *Handler) {
	for deadline := time.Now().Add(5 * time.Second); h.rehold.Load() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
}

// twoProcesses are two processes P and R of the service on one Redis,
// whose lease rounds the test runs.
func twoProcesses(t *testing.T) (p, r *Handler, rdb redis.UniversalClient, prefix string) {
	t.Helper()
	p, r, rdb, prefix, _ = withHookedReleaser(t, nil)
	return p, r, rdb, prefix
}

// withHookedReleaser is twoProcesses, R's Redis client passing through
// the hook that hook makes for the key of the leases (none if nil).
func withHookedReleaser(t *testing.T, hook func(procs string) redis.Hook) (p, r *Handler, rdb redis.UniversalClient, prefix string, ring *auth.Keyring) {
	t.Helper()
	rdb, prefix = redistest.Client(t), redistest.Prefix(t)
	ring, _, err := auth.KeyringFromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	long := func(c *Config) { c.PresenceLease = time.Hour }
	p = newRedisHandlerWith(t, rdb, prefix, ring, long)
	rb := rdb
	if hook != nil {
		hooked := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
		hooked.AddHook(hook(prefix + "{presence}:procs"))
		t.Cleanup(func() { _ = hooked.Close() })
		rb = hooked
	}
	r = newRedisHandlerWith(t, rb, prefix, ring, long)
	afterFirstRehold(p)
	afterFirstRehold(r)
	return p, r, rdb, prefix, ring
}

// claimedBy has p's lease run out and r claim it for d.
func claimedBy(t *testing.T, r, p *Handler, d time.Duration) {
	t.Helper()
	if err := p.store.EndLease(t.Context(), p.proc); err != nil {
		t.Fatal(err)
	}
	now := r.now()
	if got, err := r.store.Claim(t.Context(), p.proc, now, now.Add(d)); err != nil || got != p.proc {
		t.Fatalf("claim %q, %v", got, err)
	}
}

// backAgain is p's lease round: it renews its lease and, if it finds it
// was gone or claimed, holds its seats again.
func backAgain(t *testing.T, p *Handler) {
	t.Helper()
	if !p.renew(t.Context()) {
		t.Fatal("P's renewal failed")
	}
	if p.rehold.Swap(false) {
		for _, k := range p.presence.held() {
			p.connect(t.Context(), k.id, k.side, 1)
		}
	}
}

// TestAProcessBackDuringItsReleaseHoldsItsSeatsAgain: a process P cut off
// from Redis for longer than its lease comes back while another, R, is
// releasing its seats: P's renewal finds its lease gone and P holds its
// seats again, then R lets one of them go and stops part way (a game it
// cannot write, a Redis error, or R dying). The release was taken up by
// nobody, since the next claimant found P's lease there and dropped the
// claim, and P's renewals were no longer fresh: its player showed
// disconnected for good, the stream open on P. P now holds its seats again
// at every renewal that finds a claim on its lease, and ends a claim run
// out.
func TestAProcessBackDuringItsReleaseHoldsItsSeatsAgain(t *testing.T) {
	for _, c := range []struct {
		name string
		stop func(ctx context.Context, r *Handler, proc string, rdb redis.UniversalClient, procs string) error
	}{
		{"its release failed", func(ctx context.Context, r *Handler, proc string, _ redis.UniversalClient, _ string) error {
			return r.store.Unclaim(ctx, proc) // as reap does
		}},
		{"its claimant died", func(ctx context.Context, _ *Handler, proc string, rdb redis.UniversalClient, procs string) error {
			// The claim runs out a lease after the release last kept it.
			return rdb.ZAddXX(ctx, procs, redis.Z{Score: 1, Member: store.ClaimOf(proc)}).Err()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			p, r, rdb, prefix := twoProcesses(t)
			newer, _, _ := newXiangqiFor(t, p, "newer")
			plain, _, _ := newXiangqiFor(t, p, "plain")
			for _, id := range []string{newer, plain} {
				p.presence.opened(ctx, id, rules.First)
			}
			if !holdsFirst(t, p, plain) || !holdsFirst(t, p, newer) {
				t.Fatal("the seats are not held")
			}

			claimedBy(t, r, p, time.Hour)
			// P is back: it holds its seats again before R's release
			// reaches them.
			round := func() { backAgain(t, p) }
			round()
			// R lets the plain game's seat go, fails on the newer game,
			// and stops part way.
			storedByANewerBuild(t, rdb, prefix, newer)
			if err := r.releaseAll(ctx, p.proc); !errors.Is(err, store.ErrNewerFormat) {
				t.Fatalf("releaseAll: %v", err)
			}
			if err := c.stop(ctx, r, p.proc, rdb, prefix+"{presence}:procs"); err != nil {
				t.Fatal(err)
			}

			for range 3 {
				round()
				var wg sync.WaitGroup
				r.reap(ctx, &wg)
				wg.Wait()
			}
			if !holdsFirst(t, p, plain) {
				t.Error("the seat's stream is open on P, which renews its lease, yet the game has it let go: its player shows disconnected for good")
			}
			entries, err := rdb.ZRange(ctx, prefix+"{presence}:procs", 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(entries, store.ClaimOf(p.proc)) {
				t.Errorf("the claim on P's lease is left among the leases %v", entries)
			}
		})
	}
}

// TestAnOvertakenOpeningKeepsListedASeatWhoseClosingFailed: a renewal
// whose answer was lost has the process hold its seats again; a seat's
// rehold lists it, and its stream closes meanwhile, the closing failing
// (Redis away) and queued. The rehold, overtaken, took the seat off the
// process's list as if the closing had let it go, which it had not: the
// game had the seat held by a process that did not list it, and a stop
// (or a crash) before the next lease round left it connected for good,
// released by no reaper. The closing, retried, unlists it once it lets
// it go.
func TestAnOvertakenOpeningKeepsListedASeatWhoseClosingFailed(t *testing.T) {
	ctx := t.Context()
	h, hooked := hookedHandler(t, 0)
	afterFirstRehold(h)
	id, _, _ := newXiangqi(t, h)
	k := seatKey{id, rules.First}
	f := newListingFaults(id)
	close(f.sremRelease) // unlistings are not held back
	f.saddPasses = true
	hooked.AddHook(f)

	h.presence.opened(ctx, id, rules.First)
	if !holdsFirst(t, h, id) || !isListed(t, h, id) {
		t.Fatal("an opened seat stream is not held and listed")
	}
	// The rehold of the seat; its listing is slow.
	f.saddArmed.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.connect(ctx, id, rules.First, 1)
	}()
	select {
	case <-f.saddReached:
	case <-time.After(10 * time.Second):
		t.Fatal("the rehold never listed the seat")
	}
	// The stream closes while Redis is away.
	f.down.Store(true)
	h.presence.closed(context.WithoutCancel(ctx), id, rules.First)
	f.down.Store(false)
	h.retryMu.Lock()
	d, ok := h.retry[k]
	h.retryMu.Unlock()
	if !ok || d != -1 {
		t.Fatalf("the failed closing is not queued (%d, %v)", d, ok)
	}
	close(f.saddRelease)
	<-done
	if !holdsFirst(t, h, id) {
		t.Fatal("the failed closing let the seat go")
	}
	if !isListed(t, h, id) {
		t.Error("the game has the seat held by this process (its closing failed, queued), yet the overtaken rehold took it off the process's list")
	}
	// The closing, retried, lets the seat go and unlists it.
	h.retryPresence(ctx)
	if holdsFirst(t, h, id) || isListed(t, h, id) {
		t.Errorf("after the closing's retry: held %v, listed %v; want neither", holdsFirst(t, h, id), isListed(t, h, id))
	}
}

// TestAHeldUpProcessIsNoSilence: the only process serves all along, but
// its presence work is held up longer than its lease (a retried presence
// change waits for a game's lock, held by a slow command). Its lease runs
// on all the same: a process that starts meanwhile (a rollout, a
// scale-up) records no silence, nor does the first when its work goes on.
func TestAHeldUpProcessIsNoSilence(t *testing.T) {
	const lease = 600 * time.Millisecond
	ring, _, err := auth.KeyringFromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	short := func(c *Config) { c.PresenceLease = lease }
	h := newRedisHandlerWith(t, rdb, prefix, ring, short)
	stuck, _, _ := newXiangqiFor(t, h, "stuck")
	id, red, _ := newXiangqiFor(t, h, "served")

	unlock, err := h.locks.lock(t.Context(), stuck)
	if err != nil {
		t.Fatal(err)
	}
	h.retryLater(seatKey{stuck, rules.First}, 1)
	from := h.now()
	time.Sleep(2 * lease)
	if _, err := h.MakeMove(red, &gamev1.MakeMoveRequest{GameId: id, RequestId: "m1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatalf("a move while the presence work is held up: %v", err)
	}
	time.Sleep(lease)
	started := newRedisHandlerWith(t, rdb, prefix, ring, short)
	time.Sleep(lease)
	unlock()
	time.Sleep(lease)

	r, err := h.store.Renew(t.Context(), h.proc, h.now().Add(lease), h.now(), h.now(), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Silences) != 0 {
		t.Errorf("silences recorded while the only process served: %+v", r.Silences)
	}
	for name, p := range map[string]*Handler{"the held-up process": h, "the process started beside it": started} {
		if got := p.outages.within(from.UnixMilli(), p.now().UnixMilli()); got != 0 {
			t.Errorf("%s excuses %v of a time in which a process served", name, got)
		}
	}
}

// TestASeatIsHeldAgainAfterARenewalWhoseAnswerWasLost: another process
// released this one's seat and forgot its lease (this one was cut off
// for longer than the lease); the renewal that made the lease again ran
// in Redis, but its answer was lost. The next renewal finds the lease
// there, yet the seat, whose stream is open here, is held again.
func TestASeatIsHeldAgainAfterARenewalWhoseAnswerWasLost(t *testing.T) {
	const lease = 1500 * time.Millisecond
	ring, _, err := auth.KeyringFromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	h := newRedisHandlerWith(t, redistest.Client(t), redistest.Prefix(t), ring, func(c *Config) { c.PresenceLease = lease })
	id, _, _ := newXiangqi(t, h)
	held := func() bool { return holdsFirst(t, h, id) }
	h.presence.opened(ctx, id, rules.First)
	if !held() {
		t.Fatal("the seat whose stream opened here is not held")
	}
	claimedBy(t, h, h, time.Hour)
	if err := h.releaseAll(ctx, h.proc); err != nil {
		t.Fatal(err)
	}
	// The renewal fails as one whose answer was lost does (here it is
	// never sent), and its script runs all the same.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	h.renew(gone)
	now := h.now()
	if _, err := h.store.Renew(ctx, h.proc, now.Add(lease), now, now, nil, now.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * lease)
	if !held() {
		t.Errorf("the seat, whose stream is open here, is not held %v after the lease was renewed", 3*lease)
	}
}

// TestARetriedOpeningListsNoSeatNobodyHolds: a seat stream's client left
// while the stream's opening was recorded (routine: apps reconnect by the
// thousand after a rollout), and the opening was queued for the next
// lease round. The seat's closing came first and took it off the
// process's list; the retried opening then listed it again and, finding
// it overtaken, left it there: one entry in Redis for every such stream,
// for the life of the process, and a stop that leaves its lease to be
// reaped.
func TestARetriedOpeningListsNoSeatNobodyHolds(t *testing.T) {
	ctx := t.Context()
	ring, _, err := auth.KeyringFromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	h := newRedisHandlerWith(t, redistest.Client(t), redistest.Prefix(t), ring, func(c *Config) {
		c.PresenceGrace = 20 * time.Millisecond
		c.PresenceLease = time.Hour // the test runs the lease rounds itself
	})
	const n = 20
	var ids []string
	for i := range n {
		id, _, _ := newXiangqiFor(t, h, fmt.Sprintf("create-%d", i))
		ids = append(ids, id)
		left, cancel := context.WithCancel(ctx)
		cancel()
		h.presence.opened(left, id, rules.First)
		h.presence.closed(context.WithoutCancel(ctx), id, rules.First)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(h.presence.held()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("closings not recorded: %v still held", h.presence.held())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// An opening cut short is queued, and settled by its closing if that
	// found the seat let go; the others are retried now.
	h.retryMu.Lock()
	retries := len(h.retry)
	h.retryMu.Unlock()
	h.retryPresence(ctx)
	// A retry that got past its check as the closing came: it lists the
	// seat, and is overtaken.
	h.record(ctx, ids[0], rules.First, 1, true)
	listed, err := h.store.Held(ctx, h.proc)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if holdsFirst(t, h, id) {
			t.Fatalf("game %s: seat held after its only stream closed", id)
		}
	}
	if len(listed) > 0 {
		t.Fatalf("after %d seat streams opened and closed (%d openings retried), none held, %d games stay on this process's list: %v",
			n, retries, len(listed), listed[:min(len(listed), 3)])
	}
}

// hookedHandler is a handler on a Redis client of its own, for hooks
// that stage faults, with the given presence grace; the test runs its
// lease rounds itself.
func hookedHandler(t *testing.T, grace time.Duration) (*Handler, *redis.Client) {
	t.Helper()
	ring, _, err := auth.KeyringFromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	hooked := redis.NewClient(&redis.Options{Addr: redistest.Addr(t), MaxRetries: -1})
	t.Cleanup(func() { _ = hooked.Close() })
	h := newRedisHandlerWith(t, hooked, redistest.Prefix(t), ring, func(c *Config) {
		c.PresenceGrace = grace
		c.PresenceLease = time.Hour
	})
	return h, hooked
}

// holdUnlisting holds back the first SREM of member (a seat taken off a
// process's presence list) until released: the Redis round trip of an
// unlisting, slowed down so that the test can act inside it.
type holdUnlisting struct {
	member  string
	once    *sync.Once
	reached chan struct{}
	release chan struct{}
}

func (f holdUnlisting) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f holdUnlisting) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "srem") && slices.ContainsFunc(cmd.Args(), func(a any) bool { s, _ := a.(string); return s == f.member }) {
			hit := false
			f.once.Do(func() { hit = true })
			if hit {
				close(f.reached)
				<-f.release
			}
		}
		return next(ctx, cmd)
	}
}

func (f holdUnlisting) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// handlerHoldingUnlisting is a handler whose first unlisting of the
// first seat of a new game is held back; it returns the game too.
func handlerHoldingUnlisting(t *testing.T, grace time.Duration) (*Handler, string, holdUnlisting) {
	t.Helper()
	h, hooked := hookedHandler(t, grace)
	id, _, _ := newXiangqi(t, h)
	f := holdUnlisting{member: seatMember(id, rules.First), once: &sync.Once{}, reached: make(chan struct{}), release: make(chan struct{})}
	hooked.AddHook(f)
	return h, id, f
}

func seatMember(id string, side rules.Side) string { return id + "|" + strconv.Itoa(int(side)) }

// isListed reports whether game id is on h's presence list.
func isListed(t *testing.T, h *Handler, id string) bool {
	t.Helper()
	ids, err := h.store.Held(t.Context(), h.proc)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(ids, id)
}

// TestAnOvertakenOpeningKeepsASeatReopenedMeanwhileListed: an overtaken
// opening (a retry, or a rehold, of a seat whose closing came first) takes
// its listing back. A new stream of the seat that opened while that
// unlisting was on its way to Redis listed the seat and held it, and the
// late unlisting took the listing away: the seat held by this process but
// not on its list, so that were the process to die, the reaper would never
// release it, and it would show connected for good.
func TestAnOvertakenOpeningKeepsASeatReopenedMeanwhileListed(t *testing.T) {
	ctx := t.Context()
	h, id, f := handlerHoldingUnlisting(t, time.Minute)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A retried opening of a seat nobody holds here any more (it got
		// past retryPresence's check just as the closing came).
		h.record(ctx, id, rules.First, 1, true)
	}()
	select {
	case <-f.reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the overtaken opening never unlisted the seat")
	}
	// A new stream of the seat opens now.
	h.presence.opened(ctx, id, rules.First)
	close(f.release)
	<-done
	if !holdsFirst(t, h, id) {
		t.Fatal("the seat whose stream is open is not held")
	}
	if !isListed(t, h, id) {
		t.Error("the seat is held by this process (its stream is open) but not on the process's presence list")
	}
	// The process dies now; another reaps its lease and releases what it
	// listed.
	claimedBy(t, h, h, time.Hour)
	if err := h.releaseAll(ctx, h.proc); err != nil {
		t.Fatal(err)
	}
	if holdsFirst(t, h, id) {
		t.Fatal("after the dead process's lease was reaped, its seat is still held: connected for good")
	}
}

// TestAClosingKeepsASeatReopenedMeanwhileListed: the same race on the
// closing path: the last stream's held-back closing is committed, and a
// reconnection to this process arrives just after the grace, while the
// closing's unlisting is on its way to Redis.
func TestAClosingKeepsASeatReopenedMeanwhileListed(t *testing.T) {
	ctx := t.Context()
	h, id, f := handlerHoldingUnlisting(t, 10*time.Millisecond)
	h.presence.opened(ctx, id, rules.First)
	if !holdsFirst(t, h, id) || !isListed(t, h, id) {
		t.Fatal("an opened seat stream is not held and listed")
	}
	h.presence.closed(context.WithoutCancel(ctx), id, rules.First)
	select {
	case <-f.reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the closing never unlisted the seat")
	}
	// The client reconnects, just after the grace.
	h.presence.opened(ctx, id, rules.First)
	close(f.release)
	h.presence.running.Wait()
	if !holdsFirst(t, h, id) {
		t.Fatal("the seat whose stream is open is not held")
	}
	if !isListed(t, h, id) {
		t.Fatal("the seat is held by this process (its stream is open) but not on the process's presence list: if the process dies, no reaper releases it and it stays connected for good")
	}
}

// listingFaults is a hook that can hold back the first SREM and (once
// armed) the first SADD of member, and fail every command while down.
type listingFaults struct {
	member             string
	sremOnce, saddOnce sync.Once
	saddArmed          atomic.Bool
	saddPasses         bool
	down               atomic.Bool
	sremReached        chan struct{}
	sremRelease        chan struct{}
	saddReached        chan struct{}
	saddRelease        chan struct{}
}

// newListingFaults stages faults of the first seat of game id.
func newListingFaults(id string) *listingFaults {
	return &listingFaults{member: seatMember(id, rules.First),
		sremReached: make(chan struct{}), sremRelease: make(chan struct{}),
		saddReached: make(chan struct{}), saddRelease: make(chan struct{})}
}

func (f *listingFaults) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *listingFaults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		names := func(a any) bool { s, _ := a.(string); return s == f.member }
		switch {
		case strings.EqualFold(cmd.Name(), "srem") && slices.ContainsFunc(cmd.Args(), names):
			hit := false
			f.sremOnce.Do(func() { hit = true })
			if hit {
				close(f.sremReached)
				<-f.sremRelease
			}
		case strings.EqualFold(cmd.Name(), "sadd") && f.saddArmed.Load() && slices.ContainsFunc(cmd.Args(), names):
			hit := false
			f.saddOnce.Do(func() { hit = true })
			if hit {
				close(f.saddReached)
				<-f.saddRelease
				if f.saddPasses {
					return next(ctx, cmd)
				}
				// Redis went away while this SADD was on its way.
				err := errors.New("connection reset")
				cmd.SetErr(err)
				return err
			}
		}
		if f.down.Load() {
			err := errors.New("redis is down")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// downPipelines fails every pipeline while down.
func downPipelines(down *atomic.Bool, next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if down.Load() {
			err := errors.New("redis is down")
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

func (f *listingFaults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return downPipelines(&f.down, next)
}

// TestAFailedRelistingKeepsALaterClosing: a seat reopened while its
// unlisting was under way is listed again, and a listing that fails is
// queued for the next lease round. Queued, it overwrote a closing of the
// reopened stream that failed meanwhile (Redis went away), and was then
// dropped since the seat was no longer held: the seat stayed held by this
// process in the game, connected for good, and, not listed, released by
// no reaper of its lease.
func TestAFailedRelistingKeepsALaterClosing(t *testing.T) {
	ctx := t.Context()
	h, hooked := hookedHandler(t, 10*time.Millisecond)
	id, _, _ := newXiangqi(t, h)
	k := seatKey{id, rules.First}
	f := newListingFaults(id)
	hooked.AddHook(f)

	// Stream X opens and closes; its closing, recorded after the grace,
	// is slow to unlist the seat.
	h.presence.opened(ctx, id, rules.First)
	h.presence.closed(context.WithoutCancel(ctx), id, rules.First)
	select {
	case <-f.sremReached:
	case <-time.After(10 * time.Second):
		t.Fatal("the closing never unlisted the seat")
	}
	// Stream Y opens meanwhile: listed and held.
	h.presence.opened(ctx, id, rules.First)
	if !holdsFirst(t, h, id) {
		t.Fatal("the reopened seat is not held")
	}
	// The closing's unlisting lands; its re-listing is on its way when
	// Redis goes away.
	f.saddArmed.Store(true)
	close(f.sremRelease)
	select {
	case <-f.saddReached:
	case <-time.After(10 * time.Second):
		t.Fatal("unlistUnlessHeld never listed the reopened seat again")
	}
	f.down.Store(true)
	// Stream Y's client leaves (Redis down: its closing fails, and is
	// queued for retry).
	h.presence.closed(context.WithoutCancel(ctx), id, rules.First)
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.retryMu.Lock()
		d, ok := h.retry[k]
		h.retryMu.Unlock()
		if ok && d < 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the failed closing of stream Y was never queued for retry")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The re-listing fails now.
	close(f.saddRelease)
	h.presence.running.Wait()
	h.retryMu.Lock()
	queued := h.retry[k]
	h.retryMu.Unlock()
	// Redis is back; the next lease round retries what failed.
	f.down.Store(false)
	h.retryPresence(ctx)
	if holdsFirst(t, h, id) {
		t.Errorf("no stream of the seat is open here, Redis is back and the retries ran, yet the game still has the seat held by this process (connected for good); retry queued for it before the round: %d (the closing's -1 was overwritten by unlistUnlessHeld's +1)", queued)
	}
	if isListed(t, h, id) {
		t.Log("the seat is listed")
	} else if holdsFirst(t, h, id) {
		t.Error("the seat held is not listed either: no reaper of this process's lease will ever release it")
	}
}

// TestARelistingAfterTheSeatsLastStreamIsTakenBack: a listing again of a
// reopened seat is checked after it lands, as an opening's listing is. The
// reopened stream delivered the game's end (presence.ended, stream.go) and
// unlisted the seat while the listing again was on its way; landing after,
// it left the seat, which no stream held and presence no longer knew, on
// this process's list for as long as the process lived.
func TestARelistingAfterTheSeatsLastStreamIsTakenBack(t *testing.T) {
	ctx := t.Context()
	h, hooked := hookedHandler(t, 10*time.Millisecond)
	id, _, _ := newXiangqi(t, h)
	f := newListingFaults(id)
	f.saddPasses = true
	hooked.AddHook(f)
	h.presence.opened(ctx, id, rules.First)
	h.presence.closed(context.WithoutCancel(ctx), id, rules.First)
	select {
	case <-f.sremReached:
	case <-time.After(10 * time.Second):
		t.Fatal("the closing never unlisted the seat")
	}
	h.presence.opened(ctx, id, rules.First)
	f.saddArmed.Store(true)
	close(f.sremRelease)
	select {
	case <-f.saddReached:
	case <-time.After(10 * time.Second):
		t.Fatal("unlistUnlessHeld never listed the reopened seat again")
	}
	// The reopened stream delivers the game's end: its seat is forgotten
	// and unlisted (stream.go).
	if !h.presence.ended(id, rules.First) {
		t.Fatal("the stream was not the seat's last")
	}
	h.unlist(ctx, id, rules.First)
	close(f.saddRelease)
	h.presence.running.Wait()
	if h.presence.holds(seatKey{id, rules.First}) {
		t.Fatal("presence still holds the seat")
	}
	if isListed(t, h, id) {
		t.Error("the seat is on this process's presence list though no stream of it is open here and presence forgot it: nothing will take it off while the process lives")
	}
}

// flapHook makes a seat's stream reopen right after each unlisting of
// unlistUnlessHeld lands, and close right after each listing again lands;
// the last closing fails (Redis briefly down while it commits).
type flapHook struct {
	h      *Handler
	ctx    context.Context
	member string
	armed  atomic.Bool
	inner  atomic.Bool
	down   atomic.Bool
	srems  atomic.Int32
	sadds  atomic.Int32
}

func (f *flapHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *flapHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.down.Load() {
			err := errors.New("redis is down")
			cmd.SetErr(err)
			return err
		}
		err := next(ctx, cmd)
		names := func(a any) bool { s, _ := a.(string); return s == f.member }
		if !f.armed.Load() || f.inner.Load() || !slices.ContainsFunc(cmd.Args(), names) {
			return err
		}
		switch {
		case strings.EqualFold(cmd.Name(), "srem"):
			if f.srems.Add(1) <= 3 {
				f.inner.Store(true)
				f.h.presence.opened(f.ctx, gameOfMember(f.member), rules.First)
				f.inner.Store(false)
			}
		case strings.EqualFold(cmd.Name(), "sadd"):
			n := f.sadds.Add(1)
			if n <= 3 {
				f.inner.Store(true)
				if n == 3 {
					f.down.Store(true)
				}
				f.h.presence.closed(context.WithoutCancel(f.ctx), gameOfMember(f.member), rules.First)
				f.down.Store(false)
				f.inner.Store(false)
			}
		}
		return err
	}
}

func (f *flapHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return downPipelines(&f.down, next)
}

// gameOfMember is the game of a seat's member of a presence list.
func gameOfMember(member string) string { return member[:strings.LastIndexByte(member, '|')] }

// TestAGivenUpUnlistingKeepsAFailedClosing: an unlisting of a seat that
// keeps reopening and closing gives up after three rounds, and queues
// itself for the next lease round. Queued, it overwrote a closing of the
// seat's last stream that had failed meanwhile: the seat stayed held by
// this process in the game, and unlisted, for good.
func TestAGivenUpUnlistingKeepsAFailedClosing(t *testing.T) {
	ctx := t.Context()
	h, hooked := hookedHandler(t, 0)
	id, _, _ := newXiangqi(t, h)
	k := seatKey{id, rules.First}
	f := &flapHook{h: h, ctx: ctx, member: seatMember(id, rules.First)}
	hooked.AddHook(f)

	h.presence.opened(ctx, id, rules.First)
	if !holdsFirst(t, h, id) || !isListed(t, h, id) {
		t.Fatal("an opened seat stream is not held and listed")
	}
	f.armed.Store(true)
	// The stream closes; while its closing unlists the seat, the client
	// reconnects and leaves again, three times; the last leaving's closing
	// fails (Redis down for a moment).
	h.presence.closed(context.WithoutCancel(ctx), id, rules.First)
	f.armed.Store(false)
	if f.srems.Load() < 3 || f.sadds.Load() < 3 {
		t.Fatalf("the flapping did not happen as staged: %d unlistings, %d listings", f.srems.Load(), f.sadds.Load())
	}
	if h.presence.holds(k) {
		t.Fatal("presence still holds the seat")
	}
	h.retryMu.Lock()
	queued := h.retry[k]
	h.retryMu.Unlock()
	if !holdsFirst(t, h, id) {
		t.Fatal("staging: the failed closing should have left the seat held in the game")
	}
	// Redis is fine; the next lease rounds retry what failed.
	h.retryPresence(ctx)
	h.retryPresence(ctx)
	if holdsFirst(t, h, id) {
		t.Errorf("no stream of the seat is open here and the retries ran, yet the game has the seat held by this process (connected for good); queued before the round: %d", queued)
	}
	if holdsFirst(t, h, id) && !isListed(t, h, id) {
		t.Error("and the seat is not on this process's list: no reaper will ever release it")
	}
}

// TestARetriedOpeningThatFailsKeepsALaterClosing: a seat's opening that
// failed is retried at a lease round while its stream is still open, and
// is slow to list the seat (Redis flaky); meanwhile the stream closes and
// its closing fails too, and is queued. The retry's listing then failed,
// and queued in place of the closing, the next round found the seat no
// longer held and only unlisted it: the game kept the seat held by this
// process with no stream open here, and unlisted, connected for good.
func TestARetriedOpeningThatFailsKeepsALaterClosing(t *testing.T) {
	ctx := t.Context()
	h, hooked := hookedHandler(t, 0)
	id, _, _ := newXiangqi(t, h)
	k := seatKey{id, rules.First}
	f := newListingFaults(id)
	close(f.sremRelease) // unlistings are not held back here
	hooked.AddHook(f)

	queued := func() (int, bool) {
		h.retryMu.Lock()
		defer h.retryMu.Unlock()
		d, ok := h.retry[k]
		return d, ok
	}

	// Stream S1 opens: held and listed.
	h.presence.opened(ctx, id, rules.First)
	if !holdsFirst(t, h, id) || !isListed(t, h, id) {
		t.Fatal("an opened seat stream is not held and listed")
	}
	// Redis goes away: S1 closes (its closing fails, queued), S2 opens (its
	// opening fails, queued in place of the closing: right, S2 is open).
	f.down.Store(true)
	h.presence.closed(context.WithoutCancel(ctx), id, rules.First)
	if d, ok := queued(); !ok || d != -1 {
		t.Fatalf("staging: the failed closing is not queued (%d, %v)", d, ok)
	}
	h.presence.opened(ctx, id, rules.First)
	if d, ok := queued(); !ok || d != 1 {
		t.Fatalf("staging: the failed opening is not queued (%d, %v)", d, ok)
	}
	f.down.Store(false)

	// The lease round retries the opening; its listing is slow.
	f.saddArmed.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.retryPresence(ctx)
	}()
	select {
	case <-f.saddReached:
	case <-time.After(10 * time.Second):
		t.Fatal("the retried opening never listed the seat")
	}
	// Redis flaps again: S2 closes, its closing fails and is queued.
	f.down.Store(true)
	h.presence.closed(context.WithoutCancel(ctx), id, rules.First)
	if d, ok := queued(); !ok || d != -1 {
		t.Fatalf("staging: the failed closing of S2 is not queued (%d, %v)", d, ok)
	}
	// The retried opening's listing fails now.
	close(f.saddRelease)
	<-done
	d, _ := queued()
	f.down.Store(false)

	// Redis is back for good; two lease rounds.
	h.retryPresence(ctx)
	h.retryPresence(ctx)
	if h.presence.holds(k) {
		t.Fatal("presence still holds the seat")
	}
	if holdsFirst(t, h, id) {
		t.Errorf("no stream of the seat is open here and Redis is back for two lease rounds, yet the game has the seat held by this process (connected for good); queued before the rounds: %+d", d)
		if !isListed(t, h, id) {
			t.Error("and the seat is not on this process's list: no reaper of its lease will ever release it")
		}
	}
}

// TestAFailedRelistingOfAHeldSeatIsNotLostToAStaleClosing: a closing's
// unlisting is slow; the seat reopens (S2), S2 closes while Redis is away
// (its closing queued), and S3 opens (held: the game still has the seat
// held). The slow unlisting lands, finds the seat held and lists it again,
// and that listing fails. The queued closing, retried while S3 was open,
// was overtaken and did nothing: the seat held in the game with a stream
// open here, and not on this process's list, so that no reaper of its
// lease would release it.
func TestAFailedRelistingOfAHeldSeatIsNotLostToAStaleClosing(t *testing.T) {
	ctx := t.Context()
	h, hooked := hookedHandler(t, 0)
	id, _, _ := newXiangqi(t, h)
	k := seatKey{id, rules.First}
	f := newListingFaults(id)
	hooked.AddHook(f)

	h.presence.opened(ctx, id, rules.First) // S1
	if !holdsFirst(t, h, id) || !isListed(t, h, id) {
		t.Fatal("an opened seat stream is not held and listed")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.presence.closed(context.WithoutCancel(ctx), id, rules.First) // S1 closes
	}()
	select {
	case <-f.sremReached:
	case <-time.After(10 * time.Second):
		t.Fatal("the closing never unlisted the seat")
	}
	h.presence.opened(ctx, id, rules.First) // S2: listed, held
	f.down.Store(true)
	h.presence.closed(context.WithoutCancel(ctx), id, rules.First) // S2's closing fails
	f.down.Store(false)
	h.retryMu.Lock()
	d, ok := h.retry[k]
	h.retryMu.Unlock()
	if !ok || d != -1 {
		t.Fatalf("staging: S2's failed closing is not queued (%d, %v)", d, ok)
	}
	h.presence.opened(ctx, id, rules.First) // S3
	if !holdsFirst(t, h, id) {
		t.Fatal("staging: the seat is not held with S3 open")
	}
	// S1's unlisting lands; its listing again fails.
	f.saddArmed.Store(true)
	close(f.sremRelease)
	select {
	case <-f.saddReached:
	case <-time.After(10 * time.Second):
		t.Fatal("unlistUnlessHeld never listed the reopened seat again")
	}
	close(f.saddRelease)
	<-done
	h.retryMu.Lock()
	d = h.retry[k]
	h.retryMu.Unlock()

	// Redis is fine; two lease rounds, S3 still open.
	h.retryPresence(ctx)
	h.retryPresence(ctx)
	if !holdsFirst(t, h, id) {
		t.Error("the seat whose stream is open is not held")
	}
	if !isListed(t, h, id) {
		t.Errorf("a stream of the seat is open here and Redis was fine for two lease rounds, yet the seat is not on this process's list: if the process dies, no reaper releases it (queued before the rounds: %+d)", d)
	}
}

// TestAReleaseFinishedAfterItsProcessCameBackDroppedItsLease: P is cut
// off for longer than its lease, R claims the lease and releases P's seats.
// P comes back meanwhile and renews its lease, and holds its seats again.
// R's release then finished by dropping P's list and P's renewed lease,
// although P lived and served. A seat P opens before its next renewal is
// held in the game and listed under no lease: should P crash then (a
// process that was just cut off is the likeliest to), no reaper ever finds
// it, and the seat shows connected for good.
func TestAReleaseFinishedAfterItsProcessCameBackDroppedItsLease(t *testing.T) {
	ctx := t.Context()
	p, r, rdb, prefix := twoProcesses(t)
	g1, _, _ := newXiangqiFor(t, p, "g1")
	g2, _, _ := newXiangqiFor(t, p, "g2")
	p.presence.opened(ctx, g1, rules.First)
	if !holdsFirst(t, p, g1) {
		t.Fatal("the seat is not held")
	}

	claimedBy(t, r, p, time.Minute)
	// P is back: it renews its lease, and holds its seats again.
	backAgain(t, p)
	// R's release finishes.
	if err := r.releaseAll(ctx, p.proc); err != nil {
		t.Fatal(err)
	}
	procs := prefix + "{presence}:procs"
	_, leaseErr := rdb.ZScore(ctx, procs, p.proc).Result()

	// P opens a stream of another seat, then crashes before its next
	// renewal.
	p.presence.opened(ctx, g2, rules.First)
	if !holdsFirst(t, p, g2) {
		t.Fatal("the new seat is not held")
	}
	// Long after, every reaper looks for leases run out.
	entries, err := r.store.Expired(ctx, r.now().Add(24*time.Hour), 1000)
	if err != nil {
		t.Fatal(err)
	}
	reaped := slices.Contains(entries, p.proc) || slices.Contains(entries, store.ClaimOf(p.proc))
	if leaseErr != nil || !reaped {
		t.Errorf("P renewed its lease after R's claim, yet R's release dropped it (ZSCORE: %v); "+
			"a seat P then held (game %s) is listed under no lease a reaper will ever find (leases a day later: %v): "+
			"should P crash before its next renewal, the seat shows connected for good", leaseErr, g2, entries)
	}
}

// failRenewals fails the lease renewal script (the only one of seven keys)
// while on is set.
type failRenewals struct{ on atomic.Bool }

func (f *failRenewals) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failRenewals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); f.on.Load() && (n == "evalsha" || n == "eval") && len(cmd.Args()) > 2 {
			if k, ok := cmd.Args()[2].(int); ok && k == 7 {
				err := errors.New("i/o timeout (test)")
				cmd.SetErr(err)
				return err
			}
		}
		return next(ctx, cmd)
	}
}

func (f *failRenewals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAProcessNotYetRenewedHadItsSeatReleasedByAnother: a process whose
// first renewals at start-up failed (Redis unreachable for a moment as it
// started) serves all the same. A seat stream opened on it before its next
// renewal landed found no lease, and Holding claimed the lease, run out:
// the next reap of any other process let go of the seat, and the opponent
// saw the player disconnected though its stream was open. The claim
// Holding makes stands in for a lease, and runs out as one.
func TestAProcessNotYetRenewedHadItsSeatReleasedByAnother(t *testing.T) {
	ctx := context.Background()
	ring, _, err := auth.KeyringFromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	a := newRedisHandlerOn(t, redistest.Client(t), prefix, ring)
	hook := &failRenewals{}
	hook.on.Store(true)
	rb := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	rb.AddHook(hook)
	t.Cleanup(func() { _ = rb.Close() })
	b := newRedisHandlerOn(t, rb, prefix, ring) // its start-up renewals fail
	t.Cleanup(func() { hook.on.Store(false) })
	id, _, _ := newXiangqi(t, b)
	// A player's stream opens on b, before b's next renewal lands.
	b.presence.opened(ctx, id, rules.First)
	if !holdsFirst(t, b, id) {
		t.Fatal("the seat stream opened on b does not hold the seat")
	}
	var wg sync.WaitGroup
	a.reap(ctx, &wg)
	wg.Wait()
	if !holdsFirst(t, b, id) {
		t.Fatalf("a reaped a claim on b's lease that b's own Holding made, while b is alive with the seat's stream open: " +
			"the seat is let go in the game (its opponent told it disconnected)")
	}
}
