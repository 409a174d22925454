package handler

import (
	"slices"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/clock"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/services/game/internal/model"
	"github.com/palacehq/palace/services/game/internal/store"
)

// TestOutages: the time of a turn within outages, the one under way
// counted up to the asking instant; a ping that fails after Redis was
// known to answer begins no outage; the oldest spans are dropped first.
func TestOutages(t *testing.T) {
	var o outages
	if o.within(0, 1000) != 0 {
		t.Fatal("no outage, yet time within one")
	}
	if !o.down(100, false) || o.down(150, false) {
		t.Fatal("down: the first failure begins the outage, and only it")
	}
	if got := o.within(0, 400); got != 300*time.Millisecond {
		t.Errorf("within the outage under way: %v, want 300ms", got)
	}
	if s := o.up(500, 500, true); s != (span{100, 500}) {
		t.Fatalf("up: %v, want the span 100..500", s)
	}
	if s := o.up(600, 600, true); s != (span{}) {
		t.Fatalf("up again: %v, want nothing ended", s)
	}
	if !o.takeEnded() || o.takeEnded() {
		t.Fatal("the end of an outage is not taken exactly once")
	}
	// A ping sent at 450 that failed after the answer at 500 begins nothing.
	if o.down(450, false) {
		t.Fatal("a ping sent before the last answer began an outage")
	}
	o.down(1000, false)
	o.up(1200, 1200, true)
	// Answered at 1300, a command judged at 1250: a ping sent at 1280
	// begins nothing, and no outage of no length is recorded.
	o.up(1250, 1300, true)
	if o.down(1280, false) {
		t.Fatal("a ping sent before the command's answer began an outage")
	}
	o.down(1400, false)
	if s := o.up(1400, 1400, true); s != (span{}) || len(o.spans) != 2 {
		t.Fatalf("an outage of no length: %v, %d spans", s, len(o.spans))
	}
	for _, c := range []struct {
		from, to int64
		want     time.Duration
	}{
		{0, 2000, 600 * time.Millisecond},
		{300, 2000, 400 * time.Millisecond},
		{300, 1100, 300 * time.Millisecond},
		{500, 1000, 0},
		{1100, 1150, 50 * time.Millisecond},
	} {
		if got := o.within(c.from, c.to); got != c.want {
			t.Errorf("within(%d, %d) = %v, want %v", c.from, c.to, got, c.want)
		}
	}

	// A command that began at 1500 and failed for want of Redis stands
	// against answers since: it reopens the outage from its start, and the
	// span is counted once where it meets the one that ended.
	var f outages
	f.down(1000, false)
	f.up(1600, 1700, true)
	if !f.failed(1500, false) {
		t.Fatal("a failed command began no outage")
	}
	if got := f.within(0, 1800); got != 800*time.Millisecond {
		t.Errorf("within the ended outage and the one under way: %v, want 800ms", got)
	}
	f.up(1900, 1900, true)
	if len(f.spans) != 1 || f.spans[0] != (span{1000, 1900}) {
		t.Fatalf("spans %v, want one from 1000 to 1900", f.spans)
	}
	if got := f.within(0, 2000); got != 900*time.Millisecond {
		t.Errorf("within the merged outage: %v, want 900ms", got)
	}

	// A command judged at 2990, before a ping sent at 3000 found Redis
	// stalled, is answered at 8000: evidence that Redis answered at 2990
	// says nothing of the outage that began at 3000, which goes on until
	// an answer after it.
	var stalled outages
	stalled.down(3000, false)
	if s := stalled.up(2990, 8000, true); s != (span{}) {
		t.Fatalf("an answer judged before the outage ended it: %v", s)
	}
	if got := stalled.within(2990, 8000); got != 5*time.Second {
		t.Errorf("within the stall after an answer judged before it: %v, want 5s", got)
	}
	if s := stalled.up(8000, 8000, true); s != (span{3000, 8000}) {
		t.Fatalf("the answer after the stall ended %v, want 3000..8000", s)
	}

	var many outages
	for i := range int64(maxOutages + 5) {
		many.down(10*i, false)
		many.up(10*i+5, 10*i+5, true)
	}
	if len(many.spans) != maxOutages || many.spans[0] != (span{50, 55}) {
		t.Fatalf("%d spans from %v, want the newest %d", len(many.spans), many.spans[0], maxOutages)
	}
}

// TestARefusalOfWritesEndsOnlyWithAWrite: Redis refuses writes from 100
// (a full Redis, a read-only replica), or holds them, yet answers reads.
// Those answers do not end the outage, nor do they stand against the
// refusal of a ping sent before them; a write taken does.
func TestARefusalOfWritesEndsOnlyWithAWrite(t *testing.T) {
	var o outages
	if !o.failed(100, true) {
		t.Fatal("a refused write began no outage")
	}
	if s := o.up(200, 200, false); s != (span{}) {
		t.Fatalf("a read's answer ended the refusal: %v", s)
	}
	if got := o.within(0, 300); got != 200*time.Millisecond {
		t.Errorf("within the refusal under way: %v, want 200ms", got)
	}
	if s := o.up(400, 400, true); s != (span{100, 400}) {
		t.Fatalf("the write taken at 400 ended %v, want 100..400", s)
	}
	// A ping sent at 500 whose write was refused after a read answered
	// at 600 begins an outage from 500; so does one that finds Redis
	// refusing in an outage of reach begun before, which then only a
	// write ends.
	o.up(600, 600, false)
	if !o.down(500, true) {
		t.Fatal("a refusal was taken back by a read answered since")
	}
	o.up(700, 700, true)
	o.down(1000, false)
	o.down(1100, true)
	if s := o.up(1200, 1200, false); s != (span{}) {
		t.Fatalf("a read's answer ended an outage in which Redis refused a write: %v", s)
	}
	if s := o.up(1300, 1300, true); s != (span{1000, 1300}) {
		t.Fatalf("the write taken at 1300 ended %v, want 1000..1300", s)
	}
	// A ping held past reachTimeout (Redis stalled, or pausing writes)
	// stands against reads answered since, and only a write ends it; one
	// sent before a write was taken begins nothing.
	o.up(1400, 1600, false)
	if !o.down(1500, true) {
		t.Fatal("a held ping was taken back by a read answered since")
	}
	if s := o.up(1700, 1700, false); s != (span{}) {
		t.Fatalf("a read's answer ended an outage of a held ping: %v", s)
	}
	o.up(1800, 1800, true)
	if o.down(1750, true) || o.down(1750, false) {
		t.Fatal("a ping sent before a write was taken began an outage")
	}
	// Once writes are taken again, a read's answer ends an outage of
	// reach, as before.
	o.down(2000, false)
	if s := o.up(2100, 2100, false); s != (span{2000, 2100}) {
		t.Fatalf("a read's answer after an outage of reach ended %v, want 2000..2100", s)
	}
}

// byoyomiGame is a Xiangqi game on the default clock (5 min, then 3 x
// 30 s), Red's clock running.
func byoyomiGame(t *testing.T) *model.State {
	t.Helper()
	now := time.UnixMilli(1_700_000_000_000)
	ctl := clock.Default()
	ch, err := model.Create(model.CreateParams{ID: "g", Variant: rules.Xiangqi, Control: &ctl, Seats: [2]model.Seat{{PlayerID: "a"}, {PlayerID: "b"}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	st := ch.State
	for i, mv := range []string{"h3e3", "h10g8", "b1c3", "b10c8"} {
		now = now.Add(time.Second)
		next, err := model.Move(st, rules.Side(i%2), mv, 0, now)
		if err != nil || next.Reply != nil {
			t.Fatal(mv, err, next.Reply)
		}
		model.Seal(next, st.Version, now)
		st = next.State
	}
	return st
}

// TestALateWakeUpAfterAnExcuseAnnouncesWhatIsDue: Red's byo-yomi is due at
// the game's wake-up, a 2 s outage straddles it, and the sweeper comes 5 s
// late. Excused, byo-yomi moves 2 s later, still before now: the wake-up
// announces it with the excuse, as it would have without the outage.
func TestALateWakeUpAfterAnExcuseAnnouncesWhatIsDue(t *testing.T) {
	st := byoyomiGame(t)
	entered := time.UnixMilli(st.WakeMs)
	h := &Handler{}
	h.outages.down(entered.Add(-time.Second).UnixMilli(), false)
	h.outages.up(entered.Add(time.Second).UnixMilli(), entered.Add(time.Second).UnixMilli(), true)
	now := entered.Add(5 * time.Second)

	ch, applied, err := h.expireExcused(st, st.WakeMs, now)
	if err != nil || !applied {
		t.Fatalf("expireExcused: %v %v", applied, err)
	}
	var kinds []gamev1.ClockEventKind
	for _, e := range ch.Events {
		kinds = append(kinds, e.GetClock().GetKind())
	}
	want := []gamev1.ClockEventKind{gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED, gamev1.ClockEventKind_CLOCK_EVENT_KIND_BYO_YOMI_ENTERED}
	if len(kinds) != 2 || kinds[0] != want[0] || kinds[1] != want[1] {
		t.Fatalf("the late wake-up announced %v, want %v", kinds, want)
	}
	if next := time.UnixMilli(ch.State.WakeMs); !next.After(now) {
		t.Fatalf("the next wake-up %v is not after now", next)
	}
}

// TestASecondViewOfAnOutageAddsOnlyWhatMatters: a turn excused an outage
// by another process is excused more only when this process saw clearly
// more of it than the other did, not for the noise between two views.
func TestASecondViewOfAnOutageAddsOnlyWhatMatters(t *testing.T) {
	st := byoyomiGame(t)
	start := st.Clock.TurnStartMs
	other := &Handler{}
	other.outages.down(start+1000, false)
	other.outages.up(start+6000, start+6000, true)
	now := time.UnixMilli(start + 7000)
	ex, ok := other.excuse(st, now)
	if !ok || ex.State.Clock.ExcusedMs != 5000 {
		t.Fatalf("the first excuse: %v %+v", ok, ex.State.Clock)
	}
	for _, c := range []struct {
		from, to int64
		more     bool
	}{
		{900, 6200, false},
		{1000, 6000 + minMoreExcused.Milliseconds() - 1, false},
		{1000, 6000 + minMoreExcused.Milliseconds(), true},
	} {
		h := &Handler{}
		h.outages.down(start+c.from, false)
		h.outages.up(start+c.to, start+c.to, true)
		if _, ok := h.excuse(ex.State, now); ok != c.more {
			t.Errorf("an outage seen from %d to %d after the turn began: excused more %v, want %v", c.from, c.to, ok, c.more)
		}
	}
}

// TestContact: the contact with Redis under way began with the first
// answer to a ping after a failure, or after answers too far apart;
// without a recent answer, or after a failure, it begins now.
func TestContact(t *testing.T) {
	var c contact
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	if got := c.began(at(500)); !got.Equal(at(500)) {
		t.Fatalf("no answer yet: began %v, want now", got)
	}
	c.answered(1000, 1010)
	c.answered(1250, 1260)
	if got := c.began(at(1500)); !got.Equal(at(1010)) {
		t.Fatalf("answers every 250 ms: began %v, want the first answer, 1010", got)
	}
	// A ping sent in an outage, answered as it ends, 3 s later.
	c.answered(1500, 4500)
	if got := c.began(at(4600)); !got.Equal(at(4500)) {
		t.Fatalf("a ping answered 3 s late: began %v, want the answer, 4500", got)
	}
	c.answered(2000, 5010)
	if got := c.began(at(5100)); !got.Equal(at(5010)) {
		t.Fatalf("an answer after a gap: began %v, want the answer, 5010", got)
	}
	if got := c.began(at(8000)); !got.Equal(at(8000)) {
		t.Fatalf("no answer for 3 s (a pause): began %v, want now", got)
	}
	c.answered(8000, 8010)
	c.lost()
	if got := c.began(at(8100)); !got.Equal(at(8100)) {
		t.Fatalf("after a failed ping: began %v, want now", got)
	}
}

// Every break in the contact that no renewal has been told of is told to
// the next, each with when the contact came back, so that a link that
// flaps between two renewals has both breaks recorded as silences: the
// first, forgotten, would be charged to the players to move. A renewal
// forgets those it was told, not one that came meanwhile; and each break
// that ends asks for a renewal at once.
func TestEveryUntoldBreakIsToldToTheNextRenewal(t *testing.T) {
	var c contact
	base := time.Now().Add(-time.Minute).UnixMilli()
	at := func(ms int64) int64 { return base + ms }
	if c.answered(at(0), at(0)) {
		t.Fatal("the first answer resumed a contact")
	}
	c.lost() // first break
	if !c.answered(at(10_000), at(10_000)) {
		t.Fatal("the answer after a break did not ask for a renewal")
	}
	for ms := int64(10_250); ms <= 11_000; ms += 250 {
		if c.answered(at(ms), at(ms)) {
			t.Fatal("an answer 250 ms after the last asked for a renewal")
		}
	}
	c.lost() // second break
	c.answered(at(14_000), at(14_000))
	served := func(ms int64) time.Time { return time.UnixMilli(at(ms)).Add(contactGap) }
	told := c.untold()
	want := []store.Break{{Served: served(0), Resumed: time.UnixMilli(at(10_000))}, {Served: served(11_000), Resumed: time.UnixMilli(at(14_000))}}
	if !slices.Equal(told, want) {
		t.Fatalf("after breaks at 0 s..10 s and 11 s..14 s: told %+v, want %+v", told, want)
	}
	c.lost() // a third, while the renewal runs
	c.told(told, at(14_000))
	if got := c.untold(); len(got) != 1 || !got[0].Served.Equal(served(14_000)) || !got[0].Resumed.IsZero() {
		t.Fatalf("after a renewal told of the first two: %+v, want the third alone, under way", got)
	}
}

// TestOutagesBeforeTheTimeRanOut: an outage counts only if it began
// before the wait, counted outside outages, ran out; as within otherwise.
func TestOutagesBeforeTheTimeRanOut(t *testing.T) {
	var o outages
	o.down(100, false)
	o.up(500, 500, true)
	for _, c := range []struct {
		budget int64
		want   time.Duration
	}{{200, 400 * time.Millisecond}, {100, 400 * time.Millisecond}, {99, 0}, {0, 0}} {
		if got := o.before(0, 1000, c.budget); got != c.want {
			t.Errorf("a wait of %d ms from 0, an outage 100..500: %v before it ran out, want %v", c.budget, got, c.want)
		}
	}
	// One under way from 800: with 100 ms left at 500, the time ran out at
	// 600, before it.
	o.down(800, false)
	if got, all := o.before(0, 1000, 200), o.within(0, 1000); got != 400*time.Millisecond || all != 600*time.Millisecond {
		t.Errorf("a wait of 200 ms, outages 100..500 and from 800: %v before it ran out (want 400ms), %v in all (want 600ms)", got, all)
	}
	if got := o.before(0, 1000, 400); got != 600*time.Millisecond {
		t.Errorf("a wait of 400 ms, outages 100..500 and from 800: %v before it ran out, want 600ms", got)
	}
	// The one under way reaches back into the ended one: counted once.
	var p outages
	p.down(100, false)
	p.up(500, 500, true)
	p.failed(300, false)
	if got, all := p.before(0, 1000, 200), p.within(0, 1000); got != 900*time.Millisecond || all != got {
		t.Errorf("outages 100..500 and from 300: %v before the time ran out, %v in all; want 900ms both", got, all)
	}
}

// TestAPartialOutageNeverLosesTheOpponentsWakeUp: process A is cut off
// from Redis for most of Red's turn; process B is not, and announces Red's
// byo-yomi in the meantime (for the clock service). Back, A runs Red's
// move with the outage excused in the same commit, which moves the
// announced mark past the move. Black's turn must still be woken for at
// each of its milestones: a wake-up that changed nothing when due would be
// dropped by the sweeper after StaleAfter, and Black never flagged.
func TestAPartialOutageNeverLosesTheOpponentsWakeUp(t *testing.T) {
	lag := clock.LagPolicy{MaxPerMove: time.Second, BankCap: 5 * time.Second, RefillPerMove: 500 * time.Millisecond}
	ctl := clock.Control{Kind: clock.ByoYomi, MainTime: time.Minute, Periods: 3, PeriodTime: 30 * time.Second}
	now := time.UnixMilli(1_700_000_000_000)
	ch, err := model.Create(model.CreateParams{ID: "g", Variant: rules.Xiangqi, Control: &ctl, Lag: lag, FirstMoveTime: time.Minute,
		Seats: [2]model.Seat{{PlayerID: "a"}, {PlayerID: "b"}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	st := ch.State
	// Red has 35 s left for its turn; Black is in byo-yomi.
	for i, step := range []struct {
		mv string
		d  time.Duration
	}{{"h3e3", time.Second}, {"h10g8", time.Second}, {"b1c3", 25 * time.Second}, {"b10c8", 65 * time.Second}} {
		now = now.Add(step.d)
		next, err := model.Move(st, rules.Side(i%2), step.mv, 0, now)
		if err != nil || next.Reply != nil {
			t.Fatal(step.mv, err, next.Reply)
		}
		model.Seal(next, st.Version, now)
		st = next.State
	}
	turn := now.UnixMilli()
	if !st.Clock.Players[rules.Second].InByoYomi {
		t.Fatalf("Black is not in byo-yomi: %+v", st.Clock.Players[rules.Second])
	}

	a, b := &Handler{}, &Handler{}
	a.outages.down(turn+1000, false)
	a.outages.up(turn+40_000, turn+40_000, true)

	entered := st.WakeMs
	ex, applied, err := b.expireExcused(st, entered, time.UnixMilli(entered))
	if err != nil || !applied {
		t.Fatalf("B's wake-up for Red's byo-yomi: %v %v", applied, err)
	}
	model.Seal(ex, st.Version, time.UnixMilli(entered))
	st = ex.State

	moved := time.UnixMilli(turn + 41_000)
	mv, err := a.runExcused(command{run: func(s *model.State, now time.Time) (model.Change, error) {
		return model.Move(s, rules.First, "h1g3", 0, now)
	}}, st, moved)
	if err != nil || mv.Reply != nil {
		t.Fatal(err, mv.Reply)
	}
	if !isExcuse(mv.Events[0]) {
		t.Fatalf("A's move came without the excuse: %v", mv.Events)
	}
	model.Seal(mv, st.Version, moved)
	st = mv.State

	// Each of Black's periods, then its flag, is woken for in turn, on
	// whichever process the clock service reaches.
	var kinds []gamev1.ClockEventKind
	for range 3 {
		at := time.UnixMilli(st.WakeMs)
		for _, h := range []*Handler{a, b} {
			if _, applied, err := h.expireExcused(st, st.WakeMs, at); err != nil || !applied {
				t.Fatalf("Black's wake-up at %v after Red's move: applied %v, err %v; want it applied, or its entry is lost", at.Sub(moved), applied, err)
			}
		}
		next, applied, err := b.expireExcused(st, st.WakeMs, at)
		if err != nil || !applied {
			t.Fatal(applied, err)
		}
		model.Seal(next, st.Version, at)
		st = next.State
		for _, e := range next.Events {
			kinds = append(kinds, e.GetClock().GetKind())
		}
	}
	want := []gamev1.ClockEventKind{gamev1.ClockEventKind_CLOCK_EVENT_KIND_PERIOD_USED, gamev1.ClockEventKind_CLOCK_EVENT_KIND_PERIOD_USED}
	if len(kinds) != 3 || kinds[0] != want[0] || kinds[1] != want[1] || st.Status != model.StatusEnded || st.Result.Method != rules.Timeout {
		t.Fatalf("Black's turn announced %v and left the game %v (%+v); want two periods used, then Black flagged", kinds, st.Status, st.Result)
	}
}

// TestACommitEndsAnOutageWhereRedisWasSeenServing: a write taken
// promptly ends an outage at its command's judgment, so the turn the
// command began is not excused the commit's round trip; one held, or a
// refusal, ends it only at the answer.
func TestACommitEndsAnOutageWhereRedisWasSeenServing(t *testing.T) {
	judged := time.UnixMilli(10_000)
	for _, tc := range []struct {
		name     string
		answered time.Duration
		wrote    bool
		want     time.Time
	}{
		{"a write taken at once", time.Millisecond, true, judged},
		{"a write taken just within the timeout", reachTimeout - time.Millisecond, true, judged},
		{"a write held past the timeout", reachTimeout, true, judged.Add(reachTimeout)},
		{"a write refused at once", time.Millisecond, false, judged.Add(time.Millisecond)},
	} {
		if got := commitEnd(judged, judged.Add(tc.answered), tc.wrote); !got.Equal(tc.want) {
			t.Errorf("%s: the outage ends at %v, want %v", tc.name, got.Sub(judged), tc.want.Sub(judged))
		}
	}
}

// TestABreakTooShortToBeASilenceAsksNoRenewal: a single ping lost (a link
// dropping one ping in two) is a break whose silence is empty (the
// process served until a contactGap after its last answer, later than the
// next answer): the answer after it asks for no renewal, or a link that
// drops every other ping would renew the lease twice a second instead of
// every 5 s, each renewal reading every lease and beat.
func TestABreakTooShortToBeASilenceAsksNoRenewal(t *testing.T) {
	var c contact
	base := time.Now().Add(-time.Minute).UnixMilli()
	c.answered(base, base)
	asked := 0
	for ms := int64(250); ms <= 10_000; ms += 500 {
		c.lost() // the ping at base+ms fails
		if c.answered(base+ms+250, base+ms+250) {
			asked++
		}
	}
	if asked > 0 {
		t.Fatalf("a link losing one ping in two for 10 s (no break longer than 500 ms, none of them a silence: contactGap is %v) asked for %d renewals at once, want none", contactGap, asked)
	}
}
