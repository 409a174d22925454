package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game/internal/store"
)

func newStore(t *testing.T) *store.Store {
	st, _, _ := newStoreOn(t)
	return st
}

// newStoreOn is newStore, with its Redis and its keys' prefix.
func newStoreOn(t *testing.T) (*store.Store, redis.UniversalClient, string) {
	t.Helper()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	st, err := store.New(rdb, store.Config{Prefix: prefix, LiveTTL: time.Hour, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return st, rdb, prefix
}

// only is the one silence r recorded, zero for none.
func only(t *testing.T, r store.Renewal) store.Silence {
	t.Helper()
	switch len(r.Recorded) {
	case 0:
		return store.Silence{}
	case 1:
		return r.Recorded[0]
	}
	t.Fatalf("the renewal recorded %d silences, %+v, want one at most", len(r.Recorded), r.Recorded)
	return store.Silence{}
}

// TestRenewRecordsTheSilences: a renewal after every lease ran out records
// the span from the last lease's end (or the last clean stop, whichever is
// later) to its own time, once; a renewal while another lease runs, or
// with nothing on record, records none; every renewal returns the
// silences that end after what it has seen.
func TestRenewRecordsTheSilences(t *testing.T) {
	ctx := context.Background()
	st, rdb, prefix := newStoreOn(t)
	// Renewals are dated in the past: the script takes Redis' own time
	// when it is earlier.
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	renewIn := func(proc string, now, contact int, seen int64) store.Renewal {
		t.Helper()
		r, err := st.Renew(ctx, proc, at(now+15), at(now), at(contact), nil, seen)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	renew := func(proc string, now int, seen int64) store.Renewal {
		t.Helper()
		r, err := st.Renew(ctx, proc, at(now+15), at(now), at(now), nil, seen)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	span := func(from, to int) store.Silence {
		return store.Silence{From: at(from).UnixMilli(), To: at(to).UnixMilli()}
	}

	if r := renew("a", 0, 0); !r.Fresh || only(t, r) != (store.Silence{}) || len(r.Silences) != 0 {
		t.Fatalf("the first renewal of all: %+v, want a fresh lease and no silence", r)
	}
	// b starts while a's lease runs (a rollout, a process of another
	// release): nobody was silent.
	if r := renew("b", 10, 0); !r.Fresh || only(t, r) != (store.Silence{}) || len(r.Silences) != 0 {
		t.Fatalf("a renewal beside a live lease: %+v, want no silence", r)
	}
	if r := renew("a", 12, 0); r.Fresh || only(t, r) != (store.Silence{}) {
		t.Fatalf("a renewal of a live lease: %+v, want no silence", r)
	}
	// Both die; b's lease (renewed at 10) ends at 25, a's at 27. c starts
	// at 40: nobody held a lease from 27 to 40.
	r := renew("c", 40, 0)
	if only(t, r) != span(27, 40) || len(r.Silences) != 1 || r.Silences[0] != span(27, 40) {
		t.Fatalf("the first renewal after every lease ran out: %+v, want the silence 27..40 recorded and returned", r)
	}
	// d starts beside c: it learns the silence, records none.
	r = renew("d", 41, 0)
	if only(t, r) != (store.Silence{}) || len(r.Silences) != 1 || r.Silences[0] != span(27, 40) {
		t.Fatalf("a renewal beside c: %+v, want the silence learnt, none recorded", r)
	}
	if r = renew("d", 42, span(27, 40).To); len(r.Silences) != 0 {
		t.Fatalf("a renewal that saw the silence: %+v, want it not returned again", r)
	}

	// c and d stop cleanly at 50 and 51, their leases gone: the silence
	// begins at the last stop.
	for _, stop := range []struct {
		proc string
		at   int
	}{{"d", 51}, {"c", 50}} {
		if err := st.Stopped(ctx, stop.proc, at(stop.at)); err != nil {
			t.Fatal(err)
		}
		if err := st.Forget(ctx, stop.proc); err != nil {
			t.Fatal(err)
		}
	}
	r = renew("e", 60, span(27, 40).To)
	if only(t, r) != span(51, 60) || len(r.Silences) != 1 || r.Silences[0] != span(51, 60) {
		t.Fatalf("the first renewal after the last clean stop: %+v, want the silence 51..60", r)
	}
	// A clean stop before the end of a lease that ran on says nothing,
	// nor does a lease kept by a release that renews it by hand.
	if err := st.Stopped(ctx, "e", at(65)); err != nil {
		t.Fatal(err)
	}
	if err := st.Forget(ctx, "e"); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, prefix+"{presence}:procs", redis.Z{Score: float64(at(80).UnixMilli()), Member: "older"}).Err(); err != nil {
		t.Fatal(err)
	}
	if r = renew("f", 70, span(51, 60).To); only(t, r) != (store.Silence{}) {
		t.Fatalf("a renewal beside another release's live lease, after a stop: %+v, want no silence", r)
	}

	// Every lease has run out at 95 (g's, renewed at 80; f's at 85, the
	// older release's at 80), but g kept in touch with Redis from 90 on,
	// only too late to renew (its renewal loop held up): no silence.
	if r = renewIn("g", 80, 80, 0); only(t, r) != (store.Silence{}) {
		t.Fatalf("g's first renewal: %+v, want no silence", r)
	}
	if r = renewIn("g", 100, 90, span(51, 60).To); only(t, r) != (store.Silence{}) {
		t.Fatalf("a renewal late, of a process in touch with Redis before every lease ran out: %+v, want no silence", r)
	}
	// g's lease runs out at 115; h renews at 120, in touch with Redis
	// since 118: the silence ends there.
	if r = renewIn("h", 120, 118, span(51, 60).To); only(t, r) != span(115, 118) {
		t.Fatalf("a renewal of a process in touch with Redis since 118: %+v, want the silence 115..118", r)
	}
}

// TestRenewWithNothingOnRecordRecordsNoSilence: the service's first start,
// or a Redis that lost its data, and a lease let run out at Close, tell
// no silence.
func TestRenewWithNothingOnRecordRecordsNoSilence(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	now := time.Now()
	if err := st.EndLease(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	r, err := st.Renew(ctx, "b", now.Add(15*time.Second), now, now, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if only(t, r) != (store.Silence{}) || len(r.Silences) != 0 {
		t.Fatalf("with only a lease ended at 0 on record: %+v, want no silence", r)
	}
}

// TestSilencesAreBounded: the newest store.SilencesKept are kept, none
// older than store.SilencesKeptFor, and a silence longer than that is
// cut to it.
func TestSilencesAreBounded(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	// Dated in the past: the script takes Redis' own time when earlier.
	now := time.Now().Add(-store.SilencesKeptFor - 2*time.Hour)
	var r store.Renewal
	for i := range store.SilencesKept + 6 {
		// Each process renews once, and its lease has run out when the
		// next starts.
		var err error
		r, err = st.Renew(ctx, fmt.Sprint("p", i), now.Add(time.Second), now, now, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		now = now.Add(2 * time.Second)
	}
	if len(r.Silences) != store.SilencesKept {
		t.Fatalf("%d silences kept, want %d", len(r.Silences), store.SilencesKept)
	}
	if last := r.Silences[len(r.Silences)-1]; last != only(t, r) {
		t.Fatalf("the newest silence kept is %+v, want the one just recorded, %+v", last, only(t, r))
	}
	later := now.Add(store.SilencesKeptFor + time.Hour)
	r, err := st.Renew(ctx, "late", later.Add(time.Second), later, later, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := store.Silence{From: later.Add(-store.SilencesKeptFor).UnixMilli(), To: later.UnixMilli()}
	if only(t, r) != want || len(r.Silences) != 1 {
		t.Fatalf("after a silence longer than they are kept: %+v, want only %+v", r, want)
	}
}

// TestARenewalIsDatedByRedis: a renewal dated ahead of Redis' own time (a
// host clock ahead, before Redis' time is learnt) records no silence
// beyond Redis' time; and a silence on record that cannot be read (of
// another release, say) is left out, not an error.
func TestARenewalIsDatedByRedis(t *testing.T) {
	ctx := context.Background()
	st, rdb, prefix := newStoreOn(t)
	redisNow, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Renew(ctx, "a", redisNow.Add(-10*time.Second), redisNow.Add(-time.Minute), redisNow.Add(-time.Minute), nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, prefix+"{presence}:silences", redis.Z{Score: float64(redisNow.UnixMilli()), Member: "not a span"}).Err(); err != nil {
		t.Fatal(err)
	}
	ahead := redisNow.Add(time.Hour)
	r, err := st.Renew(ctx, "b", ahead.Add(15*time.Second), ahead, ahead, nil, 0)
	if err != nil {
		t.Fatalf("a renewal with an unreadable silence on record: %v", err)
	}
	want := redisNow.Add(-10 * time.Second).UnixMilli()
	if only(t, r).From != want || only(t, r).To < want || only(t, r).To > redisNow.Add(5*time.Second).UnixMilli() {
		t.Fatalf("a renewal an hour ahead of Redis recorded %+v, want from %d to about Redis' time %d", only(t, r), want, redisNow.UnixMilli())
	}
	if len(r.Silences) != 1 || r.Silences[0] != only(t, r) {
		t.Fatalf("silences returned: %+v, want only the one recorded", r.Silences)
	}
}

// TestASilenceIsDatedFromADeadProcesssLastBeat: a process that beat
// (Alive) served until 2.5 s after its last beat, however long its lease;
// one that never beat, of a release before beats, until its lease ran
// out; and one that beats still serves, so a process starting beside it
// records no silence.
func TestASilenceIsDatedFromADeadProcesssLastBeat(t *testing.T) {
	ctx := context.Background()
	st, lastBeat := beatsOnRecord(t)
	renew := func(proc string, now time.Time) store.Renewal {
		t.Helper()
		r, err := st.Renew(ctx, proc, now.Add(15*time.Second), now, now, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Second)

	// "dead" renewed its lease (to base+15 s) and last beat at base+1 s.
	renew("dead", base)
	lastBeat("dead", base.Add(time.Second))
	r := renew("restarted", base.Add(10*time.Second))
	if want := (store.Silence{From: base.Add(3500 * time.Millisecond).UnixMilli(), To: base.Add(10 * time.Second).UnixMilli()}); only(t, r) != want {
		t.Fatalf("a process starting 9 s after another's last beat recorded %+v, want %+v: from 2.5 s after that beat, not from its lease's end", only(t, r), want)
	}

	// "old" never beat: its lease, to base+35 s, says it served.
	renew("old", base.Add(20*time.Second))
	if r := renew("second", base.Add(30*time.Second)); only(t, r) != (store.Silence{}) {
		t.Fatalf("a process starting within the lease of one that never beat recorded %+v, want no silence", only(t, r))
	}

	// "live" beats: a process starting beside it records nothing.
	renew("live", base.Add(58*time.Second))
	lastBeat("live", base.Add(59*time.Second))
	lastBeat("old", base.Add(-time.Hour)) // long gone, as "dead" and "second"
	lastBeat("second", base.Add(-time.Hour))
	if r := renew("third", base.Add(60*time.Second)); only(t, r) != (store.Silence{}) {
		t.Fatalf("a process starting 1 s after another's beat recorded %+v, want no silence", only(t, r))
	}
}

// TestABeatingProcessWithoutALeaseIsNoSilence: a process
// that beats (store.Alive) reaches Redis and serves, lease or not. Its
// lease may be missing while it serves: Redis lost its data (a restart
// without persistence, a failover to an empty replica) and the process
// has beaten since but not yet renewed (it renews every third of its
// lease, 5 s by default; it beats every second), or another process
// reaped its lease while it was paused or cut off and it has not renewed
// since coming back. A process that starts then, beside a dead one whose
// lease is on record, must not record a silence over that live process's
// beats: the players of its games would be excused time they had.
func TestABeatingProcessWithoutALeaseIsNoSilence(t *testing.T) {
	ctx := context.Background()
	st, lastBeat := beatsOnRecord(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	// After Redis lost its data: "dead" renewed at base, beat at base+1 s,
	// and was killed.
	if _, err := st.Renew(ctx, "dead", base.Add(15*time.Second), base, base, nil, 0); err != nil {
		t.Fatal(err)
	}
	lastBeat("dead", base.Add(time.Second))
	// "live" beats every second all along; its next renewal has not come.
	for s := 0; s <= 9; s++ {
		lastBeat("live", base.Add(time.Duration(s)*time.Second+500*time.Millisecond))
	}
	now := base.Add(10 * time.Second)
	r, err := st.Renew(ctx, "started", now.Add(15*time.Second), now, now, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if only(t, r) != (store.Silence{}) {
		t.Fatalf("a process starting 0.5 s after another's last beat (that one without a lease on record) recorded the silence %v..%v (%v), "+
			"want none: the beating process served all along",
			time.UnixMilli(only(t, r).From).Sub(base), time.UnixMilli(only(t, r).To).Sub(base),
			time.Duration(only(t, r).To-only(t, r).From)*time.Millisecond)
	}
}

// A process whose contact with Redis broke twice since its last renewal
// (a link that flaps) served before, between and after the breaks, and
// nobody else served through them: each break is a silence of its own,
// from when the process stopped serving until its contact came back; the
// stretch between them, which the process served, is none.
func TestEachBreakInAProcesssContactIsASilence(t *testing.T) {
	ctx := context.Background()
	st, lastBeat := beatsOnRecord(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	// "dead" last beat at base and was killed; "flapping" renewed at base
	// (its lease to base+60 s), lost Redis from base+1 s (it served until
	// base+4 s, as its pings tell) until base+12 s, and again from
	// base+14.5 s until base+16 s, when it renews.
	for _, p := range []string{"dead", "flapping"} {
		if _, err := st.Renew(ctx, p, at(60_000), base, base, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	lastBeat("dead", base)
	r, err := st.Renew(ctx, "flapping", at(76_000), at(16_000), at(16_000), []store.Break{
		{Served: at(4000), Resumed: at(12_000)},
		{Served: at(14_500)},
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Silence{{From: at(4000).UnixMilli(), To: at(12_000).UnixMilli()}, {From: at(14_500).UnixMilli(), To: at(16_000).UnixMilli()}}
	if !slices.Equal(r.Recorded, want) {
		var got []string
		for _, s := range r.Recorded {
			got = append(got, fmt.Sprintf("%v..%v", time.UnixMilli(s.From).Sub(base), time.UnixMilli(s.To).Sub(base)))
		}
		t.Fatalf("a renewal told of two breaks (4 s..12 s and 14.5 s..16 s after base) recorded %v, want both", got)
	}
	// Another process still beating served through any break.
	lastBeat("dead", at(20_000))
	r, err = st.Renew(ctx, "flapping", at(85_000), at(25_000), at(25_000), []store.Break{{Served: at(21_000), Resumed: at(22_000)}}, 0)
	if err != nil || len(r.Recorded) != 0 {
		t.Fatalf("a break while another process beat: recorded %+v (%v), want none", r.Recorded, err)
	}
}

// beatsOnRecord is a store, and a way to put a process's last beat on
// record at any time, past ones included, as store.Alive puts it at
// Redis' time.
func beatsOnRecord(t *testing.T) (*store.Store, func(proc string, at time.Time)) {
	st, rdb, prefix := newStoreOn(t)
	return st, func(proc string, at time.Time) {
		t.Helper()
		if err := rdb.ZAdd(context.Background(), prefix+"{presence}:alive", redis.Z{Score: float64(at.UnixMilli()), Member: proc}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestABreakSharedByEveryProcessIsASilence: the only two game processes,
// "a" and "b", are cut off from Redis together (one partition) from 1 s
// after base until 12 s; each served until 3 s, as its pings tell. Nobody
// could serve from 3 s to 12 s. Both beat again at 12.3 s and renew at
// 12.5 s and 12.6 s, each told its break. Each took the other's fresh
// beat for service through its own break, and neither recorded a silence:
// 9 s nobody served were charged. A process serves but for the breaks it
// reported: the second to renew records the silence.
func TestABreakSharedByEveryProcessIsASilence(t *testing.T) {
	ctx := context.Background()
	st, _, at := cutOffTogether(t)
	var recorded []store.Silence
	for i, p := range []string{"a", "b"} {
		now := at(12_500 + 100*i)
		r, err := st.Renew(ctx, p, now.Add(15*time.Second), now, at(12_000), []store.Break{{Served: at(3000), Resumed: at(12_000)}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		recorded = append(recorded, r.Recorded...)
	}
	if want := []store.Silence{{From: at(3000).UnixMilli(), To: at(12_000).UnixMilli()}}; !slices.Equal(recorded, want) {
		t.Fatalf("both processes cut off together from 3 s to 12 s (each told its renewal so), none serving: recorded %+v, want %+v", recorded, want)
	}
}

// A process that first beat during another's break did not serve before:
// the part of the break before its first beat is a silence, though it
// beats now.
func TestAProcessStartedDuringABreakDidNotServeBeforeIt(t *testing.T) {
	ctx := context.Background()
	st, rdb, prefix := newStoreOn(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	if _, err := st.Renew(ctx, "cut", at(60_000), base, base, nil, 0); err != nil {
		t.Fatal(err)
	}
	for proc, beats := range map[string][2]int{"cut": {0, 12_300}, "started": {8000, 12_300}} {
		for key, ms := range map[string]int{"{presence}:born": beats[0], "{presence}:alive": beats[1]} {
			if err := rdb.ZAdd(ctx, prefix+key, redis.Z{Score: float64(at(ms).UnixMilli()), Member: proc}).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	now := at(12_500)
	r, err := st.Renew(ctx, "cut", now.Add(time.Minute), now, at(12_000), []store.Break{{Served: at(3000), Resumed: at(12_000)}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []store.Silence{{From: at(3000).UnixMilli(), To: at(8000).UnixMilli()}}; !slices.Equal(r.Recorded, want) {
		t.Fatalf("a break from 3 s to 12 s, another process first beating at 8 s: recorded %+v, want %+v", r.Recorded, want)
	}
}

// TestACleanStopDoesNotServeThroughItsOwnBreak: "a" and "b",
// the only game processes, are cut off from Redis together (one partition)
// from 3 s to 12 s; each beats again at 12.3 s. "b" renews at 12.4 s,
// telling its break (it records nothing: "a" beat since), and then stops
// cleanly at 12.45 s (a rollout, or a restart the partition brought on).
// "a" renews at 12.5 s, telling its break. Nobody served from 3 s to 12 s,
// and "b" said so itself; but the last clean stop counted as service from
// the beginning of time, so no silence was ever recorded: 9 s charged to
// the side to move. A process stopped cleanly served until its stop, but
// for its breaks.
func TestACleanStopDoesNotServeThroughItsOwnBreak(t *testing.T) {
	ctx := context.Background()
	st, base, at := cutOffTogether(t)
	var recorded []store.Silence
	r, err := st.Renew(ctx, "b", at(27_400), at(12_400), at(12_000), []store.Break{{Served: at(3000), Resumed: at(12_000)}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	recorded = append(recorded, r.Recorded...)
	// b stops cleanly, as Handler.Close does.
	if err := st.Stopped(ctx, "b", at(12_450)); err != nil {
		t.Fatal(err)
	}
	if err := st.Gone(ctx, "b", at(12_450)); err != nil {
		t.Fatal(err)
	}
	if err := st.Forget(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	r, err = st.Renew(ctx, "a", at(27_500), at(12_500), at(12_000), []store.Break{{Served: at(3000), Resumed: at(12_000)}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	recorded = append(recorded, r.Recorded...)
	if covered := coveredMs(recorded, at(3000).UnixMilli(), at(12_000).UnixMilli()); covered < 9000 {
		t.Fatalf("a and b cut off together from 3 s to 12 s, both told their renewals so, b then stopping cleanly at 12.45 s: recorded %v, covering %v of the 9 s nobody served",
			rel(recorded, base), time.Duration(covered)*time.Millisecond)
	}
}

// TestALiveProcessIsNotRebornAfterAWeek: "long" has served and beaten
// every second for over a week (its start is older than the 7 days starts
// are kept). alive.lua drops that start, and its very next beat recorded a
// new one, its first beat: the live process counted as started a moment
// ago, and "cut"'s break in the seconds before was recorded as a silence
// though "long" served throughout. A beat records the process's start.
func TestALiveProcessIsNotRebornAfterAWeek(t *testing.T) {
	ctx := context.Background()
	st, rdb, prefix := newStoreOn(t)
	now := time.Now()
	for _, p := range []string{"long", "cut"} {
		if _, err := st.Renew(ctx, p, now.Add(time.Minute), now.Add(-30*time.Second), now.Add(-30*time.Second), nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	// long's first beat, 8 days ago.
	if err := rdb.ZAdd(ctx, prefix+"{presence}:born", redis.Z{Score: float64(now.Add(-8 * 24 * time.Hour).UnixMilli()), Member: "long"}).Err(); err != nil {
		t.Fatal(err)
	}
	// Its beats, a second apart, as keepBeating makes them.
	for range 2 {
		if err := st.Alive(ctx, "long", now.Add(-8*24*time.Hour), nil); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Now()
	r, err := st.Renew(ctx, "cut", at.Add(time.Minute), at, at.Add(-time.Second), []store.Break{{Served: at.Add(-10 * time.Second), Resumed: at.Add(-time.Second)}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Recorded) != 0 {
		born, _ := rdb.ZScore(ctx, prefix+"{presence}:born", "long").Result()
		t.Fatalf("\"cut\" was cut off for 9 s while \"long\" (beating for 8 days) served: recorded %v; long's first beat now on record: %v ago (want none recorded)",
			rel(r.Recorded, at), at.Sub(time.UnixMilli(int64(born))))
	}
}

// TestALiveProcessIsNotRebornByACrashLoop: as above, but the start of
// "long" (an hour old) is trimmed by rank: a replica in a crash loop starts
// 1024 times within the week (beatsKept), each start a new one; the
// oldest, the live process's, goes.
func TestALiveProcessIsNotRebornByACrashLoop(t *testing.T) {
	ctx := context.Background()
	st, rdb, prefix := newStoreOn(t)
	now := time.Now()
	for _, p := range []string{"long", "cut"} {
		if _, err := st.Renew(ctx, p, now.Add(time.Minute), now.Add(-30*time.Second), now.Add(-30*time.Second), nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.ZAdd(ctx, prefix+"{presence}:born", redis.Z{Score: float64(now.Add(-time.Hour).UnixMilli()), Member: "long"}).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 1024 {
		if err := st.Alive(ctx, fmt.Sprintf("crashing-%d", i), time.Now(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Alive(ctx, "long", now.Add(-time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	r, err := st.Renew(ctx, "cut", at.Add(time.Minute), at, at.Add(-time.Second), []store.Break{{Served: at.Add(-10 * time.Second), Resumed: at.Add(-time.Second)}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Recorded) != 0 {
		born, _ := rdb.ZScore(ctx, prefix+"{presence}:born", "long").Result()
		t.Fatalf("\"cut\" was cut off for 9 s while \"long\" (beating for an hour) served: recorded %v; long's first beat now on record: %v ago (want none recorded)",
			rel(r.Recorded, at), at.Sub(time.UnixMilli(int64(born))))
	}
}

// coveredMs is how much of [from, to] the silences cover.
func coveredMs(ss []store.Silence, from, to int64) int64 {
	covered := int64(0)
	for ms := from; ms < to; ms++ {
		for _, s := range ss {
			if s.From <= ms && ms < s.To {
				covered++
				break
			}
		}
	}
	return covered
}

// rel shows silences relative to base.
func rel(ss []store.Silence, base time.Time) []string {
	var out []string
	for _, s := range ss {
		out = append(out, fmt.Sprintf("%v..%v", time.UnixMilli(s.From).Sub(base), time.UnixMilli(s.To).Sub(base)))
	}
	return out
}

// cutOffTogether is a store on which processes "a" and "b" renewed at base
// and beat last at 1 s, before both were cut off, and again at 12.3 s;
// at(ms) is base and ms.
func cutOffTogether(t *testing.T) (*store.Store, time.Time, func(ms int) time.Time) {
	t.Helper()
	st, lastBeat := beatsOnRecord(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	for _, p := range []string{"a", "b"} {
		if _, err := st.Renew(context.Background(), p, at(15_000), base, base, nil, 0); err != nil {
			t.Fatal(err)
		}
		lastBeat(p, at(1000))
		lastBeat(p, at(12_300))
	}
	return st, base, at
}

// TestAPreviousReleasesCleanStopServedUntilIt: a rollout.
// "old" runs the previous release (it keeps a lease, and its clean stop
// leaves no beat: Gone removed it, or it never beat), "new" this one. "new"
// is cut off from Redis from 3 s to 12 s; "old" serves until it stops
// cleanly at 10 s (Stopped, Forget, as its Close does). Nobody served only
// from 10 s to 12 s, yet the break path no longer counts the last clean
// stop, nor a process without a beat or lease: the whole 3 s..12 s was
// recorded, 7 s "old" served excused to the side to move. A stop that
// leaves no beat of its process counts as service until it.
func TestAPreviousReleasesCleanStopServedUntilIt(t *testing.T) {
	ctx := context.Background()
	st, rdb, prefix := newStoreOn(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	for _, p := range []string{"old", "new"} {
		if _, err := st.Renew(ctx, p, at(15_000), base, base, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.ZAdd(ctx, prefix+"{presence}:alive", redis.Z{Score: float64(at(12_300).UnixMilli()), Member: "new"}).Err(); err != nil {
		t.Fatal(err)
	}
	// old's Close, as releases before this one do it: the last stop's
	// millisecond alone.
	if err := rdb.Set(ctx, prefix+"{presence}:stopped", at(10_000).UnixMilli(), time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := st.Forget(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	r, err := st.Renew(ctx, "new", at(27_500), at(12_500), at(12_000), []store.Break{{Served: at(3000), Resumed: at(12_000)}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []store.Silence{{From: at(10_000).UnixMilli(), To: at(12_000).UnixMilli()}}; !slices.Equal(r.Recorded, want) {
		t.Fatalf("new cut off 3 s..12 s, old (previous release) serving until its clean stop at 10 s: recorded %v, want [10s..12s]", rel(r.Recorded, base))
	}
}

// TestABreakUnderWayIsKeptOnce: a process whose pings
// fail while its beats still reach Redis (on a cluster, another master
// down) reports the same break under way at every beat; alive.lua dates
// its end by the beat, so every beat adds another member
// "proc|served|now" for the same break, and the set grew by one a second
// a process, up to its bound (1024), where it evicted every other
// process's breaks. A break under way is one member, its end the score.
func TestABreakUnderWayIsKeptOnce(t *testing.T) {
	ctx := context.Background()
	st, rdb, prefix := newStoreOn(t)
	started := time.Now().Add(-time.Minute)
	served := time.Now().Add(-10 * time.Second)
	for range 5 {
		if err := st.Alive(ctx, "x", started, []store.Break{{Served: served}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Millisecond)
	}
	members, err := rdb.ZRange(ctx, prefix+"{presence}:breaks", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 1 {
		t.Fatalf("5 beats of one process reporting one break under way left %d members: %v", len(members), members)
	}
}

// TestABeatingProcesssBreaksDoNotEvictAnothers: as
// above, but what the growth costs: "b" reported a break (3 s..12 s) that
// it shared with "a", which is still cut off; "x", beating through a
// break under way of its own, pushes b's out of the set within 1024
// beats (17 minutes). When "a" came back, b counted as having served
// 3 s..12 s: nothing was recorded of it.
func TestABeatingProcesssBreaksDoNotEvictAnothers(t *testing.T) {
	ctx := context.Background()
	st, lastBeat := beatsOnRecord(t)
	base := time.Now().Add(-20 * time.Minute).Truncate(time.Second)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	for _, p := range []string{"a", "b"} {
		if _, err := st.Renew(ctx, p, at(15_000), base, base, nil, 0); err != nil {
			t.Fatal(err)
		}
		lastBeat(p, at(1000))
	}
	// b comes back at 12 s and tells its break; a is still cut off, and
	// served until 3 s.
	if _, err := st.Renew(ctx, "b", time.Now().Add(time.Hour), at(12_500), at(12_000), []store.Break{{Served: at(3000), Resumed: at(12_000)}}, 0); err != nil {
		t.Fatal(err)
	}
	lastBeat("b", time.Now())
	// x beats through a break under way of its own (served until 15 s,
	// after which b served), once a millisecond here for once a second.
	for range 1100 {
		if err := st.Alive(ctx, "x", at(14_000), []store.Break{{Served: at(15_000)}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	now := time.Now()
	r, err := st.Renew(ctx, "a", now.Add(time.Minute), now, now, []store.Break{{Served: at(3000)}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if covered := coveredMs(r.Recorded, at(3000).UnixMilli(), at(12_000).UnixMilli()); covered < 9000 {
		t.Fatalf("a and b cut off together 3 s..12 s, x beating through a break of its own: recorded %v, covering %v of the 9 s nobody served",
			rel(r.Recorded, base), time.Duration(covered)*time.Millisecond)
	}
}

// TestAResolvedBreakReplacesItsUnderWayMember: x beats once while its
// break (from 20 s ago) is under way as it saw it, then beats again with
// the break resolved 5 s ago (the ping that ended it answered while the
// first beat was in flight, or Redis' clock runs ahead of x's). The break
// is [-20 s, -5 s]; x served from -5 s on. The member "x|from|u", scored
// by the first beat's Redis time, was never removed once the break
// resolved: another process's renewal counted x as not serving until that
// beat, and recorded 5 s nobody missed as a silence.
func TestAResolvedBreakReplacesItsUnderWayMember(t *testing.T) {
	ctx := context.Background()
	st, rdb, prefix := newStoreOn(t)
	now := time.Now().Truncate(time.Millisecond)
	started, from, resumed := now.Add(-time.Minute), now.Add(-20*time.Second), now.Add(-5*time.Second)
	if _, err := st.Renew(ctx, "a", now.Add(time.Hour), now.Add(-time.Minute), now.Add(-time.Minute), nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Alive(ctx, "x", started, []store.Break{{Served: from}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Alive(ctx, "x", started, []store.Break{{Served: from, Resumed: resumed}}); err != nil {
		t.Fatal(err)
	}
	members, _ := rdb.ZRange(ctx, prefix+"{presence}:breaks", 0, -1).Result()
	t.Logf("breaks after the resolving beat: %v", members)
	end := time.Now()
	r, err := st.Renew(ctx, "a", end.Add(time.Hour), end, end, []store.Break{{Served: from, Resumed: end}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Silence{{From: from.UnixMilli(), To: resumed.UnixMilli()}}
	if !slices.Equal(r.Recorded, want) {
		t.Fatalf("a cut off -20 s..now, x cut off -20 s..-5 s: recorded %v, want [-20s..-5s]", rel(r.Recorded, now))
	}
}
