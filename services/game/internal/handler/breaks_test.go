package handler

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game/internal/store"
)

// heldRenewal holds the first script run (a lease's renewal) for a
// while, as a Redis that stalls or a link that drops packets holds it,
// and runs during it what happens meanwhile elsewhere in the process.
type heldRenewal struct {
	mu       sync.Mutex
	armed    bool
	hold     time.Duration
	meantime func()
}

func (r *heldRenewal) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *heldRenewal) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			r.mu.Lock()
			armed := r.armed
			r.armed = false
			r.mu.Unlock()
			if armed {
				time.Sleep(r.hold)
				r.meantime()
			}
		}
		return next(ctx, cmd)
	}
}

func (r *heldRenewal) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestABreakThatEndsDuringItsRenewalIsRecordedWhole: the only game
// process loses Redis; a renewal begun while its contact is still broken
// waits 3 s on Redis (a link dropping packets, a stalled Redis) and
// meanwhile the pings get through again. The renewal, told the break as
// under way, records its silence up to when it began; the rest, to the
// resumption, is told to the renewal the resumption asks for: forgotten,
// those 3 s nobody could serve were charged to the side to move.
func TestABreakThatEndsDuringItsRenewalIsRecordedWhole(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	held := &heldRenewal{hold: 3 * time.Second}
	rdb.AddHook(held)
	st, err := store.New(rdb, store.Config{Prefix: prefix, LiveTTL: time.Hour, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	counter, err := noop.NewMeterProvider().Meter("test").Int64Counter("silences")
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{store: st, log: slog.New(slog.NewTextHandler(io.Discard, nil)), cfg: Config{PresenceLease: 15 * time.Second}, proc: "flapping"}
	h.metrics.silences = counter
	now := time.Now()
	h.started = now.Add(-30 * time.Second).UnixMilli()
	// Its lease runs well past all this (it does not cap the break).
	if _, err := st.Renew(ctx, h.proc, now.Add(time.Minute), now.Add(-30*time.Second), now.Add(-30*time.Second), nil, 0); err != nil {
		t.Fatal(err)
	}
	// Pings answered every 250 ms until 10 s ago, then none.
	for ms := now.Add(-30 * time.Second).UnixMilli(); ms <= now.Add(-10*time.Second).UnixMilli(); ms += 250 {
		h.contact.answered(ms, ms)
	}
	lastAnswer := now.Add(-10 * time.Second).UnixMilli()
	h.contact.lost()

	var resumed int64
	var askedSoon bool
	held.armed = true
	held.meantime = func() {
		// The pings get through again while the renewal waits on Redis.
		at := time.Now().UnixMilli()
		askedSoon = h.contact.answered(at-50, at)
		resumed = at
	}
	began := time.Now().UnixMilli()
	if !h.renew(ctx) {
		t.Fatal("the held renewal failed")
	}
	if !askedSoon {
		t.Fatal("the resumption did not ask for a renewal")
	}
	// The renewal asked for at once (renewSoon).
	if !h.renew(ctx) {
		t.Fatal("the renewal after the resumption failed")
	}

	served := lastAnswer + contactGap.Milliseconds()
	texts, err := rdb.ZRange(ctx, prefix+"{presence}:silences", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	// How much of [served, resumed] the recorded silences cover.
	covered := int64(0)
	cursor := served
	for _, text := range texts { // sorted by their ends
		f, to, _ := strings.Cut(text, ":")
		from, _ := strconv.ParseInt(f, 10, 64)
		end, _ := strconv.ParseInt(to, 10, 64)
		from, end = max(from, cursor), min(end, resumed)
		if end > from {
			covered += end - from
			cursor = end
		}
	}
	if missing := (resumed - served) - covered; missing > 100 {
		t.Fatalf("the only process was cut off from %v ago (served until %v ago) until its pings got through again, %v into a renewal begun while it was cut off: "+
			"silences recorded %v, covering %v of the %v nobody served; %v charged to the side to move (want all of it recorded)",
			time.Duration(now.UnixMilli()-lastAnswer)*time.Millisecond, time.Duration(now.UnixMilli()-served)*time.Millisecond,
			time.Duration(resumed-began)*time.Millisecond, texts, time.Duration(covered)*time.Millisecond,
			time.Duration(resumed-served)*time.Millisecond, time.Duration(missing)*time.Millisecond)
	}
}

// TestABeatDoesNotVouchForABreakNotYetTold: "a" and "b",
// the only game processes, are cut off from Redis together for about 10 s
// (one partition). When the link is back, b's pings get through (asking
// for a renewal at once), and b's beat, due on its own ticker, comes
// first; b is then killed (OOM, node lost) before its renewal runs, so its
// break is never told. a renews, telling its own break: b's fresh beat
// counts as service through a's whole break (b reported no break), and no
// silence was recorded by anyone, ever: the 9 s nobody served were charged
// to the side to move, far past the 2.5 s a crash may be charged. A beat
// records the breaks no renewal has yet.
func TestABeatDoesNotVouchForABreakNotYetTold(t *testing.T) {
	ctx := context.Background()
	st, b, lastAnswer := cutOffBeside(t, nil)
	b.contact.lost()
	back := time.Now().UnixMilli()
	if !b.contact.answered(back-50, back) {
		t.Fatal("b's contact came back after a 10 s break and asked for no renewal")
	}
	b.beat(ctx) // its ticker's beat; b is killed before renewing
	aChargedTheGraceAtMost(t, st, lastAnswer, "b killed after its first beat since, before its renewal")
}

// TestACleanStopDoesNotVouchForABreakNotYetTold: "a" and
// "b", the only game processes, are cut off together for 10 s. b is told
// to stop meanwhile (a rollout, or its orchestrator restarting it), and
// Redis comes back while it closes: Close stops its pings, beats and
// renewals first, so the break under way is never told, and Gone dates
// b's last beat to its stop, vouching for b's service from its start
// until then, through the break. a renews, telling its break: no silence
// was recorded by anyone, the 10 s charged to the side to move, far past
// the 2.5 s grace. Close beats once more first, with the untold breaks.
func TestACleanStopDoesNotVouchForABreakNotYetTold(t *testing.T) {
	closed := func() chan struct{} { c := make(chan struct{}); close(c); return c }
	st, b, lastAnswer := cutOffBeside(t, func(h *Handler) {
		h.stopLease, h.leaseDone, h.renewDone, h.watchDone, h.beatDone, h.confirmDone = func() {}, closed(), closed(), closed(), closed(), closed()
		h.presence = &presence{}
	})
	b.contact.lost()
	// Redis is back; b closes.
	b.Close(context.Background())
	aChargedTheGraceAtMost(t, st, lastAnswer, "b stopping cleanly as Redis came back")
}

// TestABeatAfterAPauseDoesNotVouchForIt: as
// TestABeatDoesNotVouchForABreakNotYetTold, but b's contact broke by a
// pause (its host froze with a's, or its goroutines stalled): no ping
// failed, so contact.lost never ran and b's breaks are empty. Its ticker's
// beat comes first on waking, and reports no break: b's fresh beat
// vouches for the whole pause. b is killed before its next ping (which
// would have found the break, as contact.began does for a renewal). a
// renewed, telling its break: nothing recorded, 9 s charged. A beat counts
// a pause as a break under way, as began does.
func TestABeatAfterAPauseDoesNotVouchForIt(t *testing.T) {
	st, b, lastAnswer := cutOffBeside(t, nil)
	// b wakes: its beat comes first; it is killed right after.
	b.beat(context.Background())
	aChargedTheGraceAtMost(t, st, lastAnswer, "b paused with a, killed after the beat it woke to")
}

// cutOffBeside is a store on which game processes "a" and "b" started
// 30 s ago and last beat 11 s ago, and b, edited by with, whose pings
// were answered until then, when it was cut off (or paused) with a;
// lastAnswer is when.
func cutOffBeside(t *testing.T, with func(*Handler)) (*store.Store, *Handler, int64) {
	t.Helper()
	ctx := context.Background()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st, err := store.New(rdb, store.Config{Prefix: prefix, LiveTTL: time.Hour, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, p := range []string{"a", "b"} {
		if _, err := st.Renew(ctx, p, now.Add(time.Minute), now.Add(-30*time.Second), now.Add(-30*time.Second), nil, 0); err != nil {
			t.Fatal(err)
		}
		for key, at := range map[string]time.Time{"{presence}:born": now.Add(-30 * time.Second), "{presence}:alive": now.Add(-11 * time.Second)} {
			if err := rdb.ZAdd(ctx, prefix+key, redis.Z{Score: float64(at.UnixMilli()), Member: p}).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	b := &Handler{store: st, log: slog.New(slog.NewTextHandler(io.Discard, nil)), cfg: Config{PresenceLease: 15 * time.Second}, proc: "b"}
	if with != nil {
		with(b)
	}
	b.started = now.Add(-30 * time.Second).UnixMilli()
	lastAnswer := now.Add(-11 * time.Second).UnixMilli()
	for ms := b.started; ms <= lastAnswer; ms += 250 {
		b.contact.answered(ms, ms)
	}
	return st, b, lastAnswer
}

// aChargedTheGraceAtMost renews "a", telling its break from lastAnswer
// to now, and fails unless the silences recorded leave at most the 2.5 s
// grace of it charged to the side to move.
func aChargedTheGraceAtMost(t *testing.T, st *store.Store, lastAnswer int64, what string) {
	t.Helper()
	back := time.Now().UnixMilli()
	served := lastAnswer + contactGap.Milliseconds()
	r, err := st.Renew(context.Background(), "a", time.Now().Add(time.Minute), time.Now(), time.UnixMilli(back), []store.Break{{Served: time.UnixMilli(served), Resumed: time.UnixMilli(back)}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	covered := int64(0)
	for _, s := range r.Recorded {
		covered += max(0, min(s.To, back)-max(s.From, served))
	}
	if charged := time.Duration(back-served-covered) * time.Millisecond; charged > 2500*time.Millisecond {
		t.Fatalf("a and b cut off together, neither serving for %v, %s: a's renewal recorded %+v; %v charged to the side to move (want at most the 2.5 s grace)",
			time.Duration(back-served)*time.Millisecond, what, r.Recorded, charged)
	}
}
