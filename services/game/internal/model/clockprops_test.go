package model

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/clock"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
)

// A move exactly at the end of main time or of a period keeps the period;
// a millisecond later costs it, two at once if need be; a millisecond
// after the last period the sweeper flags the game at that instant. The
// read, the move's event and the stored clock agree on the periods left,
// and the period is whole again after the move.
func TestByoYomiAtItsBoundaries(t *testing.T) {
	ctl := clock.Control{Kind: clock.ByoYomi, MainTime: 10 * time.Second, Periods: 3, PeriodTime: 5 * time.Second}
	for _, tc := range []struct {
		name        string
		after       time.Duration // after Red's budget of main time begins
		wantPeriods int
		wantFlag    bool
	}{
		{"end of main", 0, 3, false},
		{"end of first period", 5 * time.Second, 3, false},
		{"just after first period", 5*time.Second + time.Millisecond, 2, false},
		{"end of second", 10 * time.Second, 2, false},
		{"two periods at once", 10*time.Second + time.Millisecond, 1, false},
		{"end of last", 15 * time.Second, 1, false},
		{"after last", 15*time.Second + time.Millisecond, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, now := afterFourMoves(t, ctl, clock.LagPolicy{}, [2]Seat{{PlayerID: "a"}, {PlayerID: "b"}})
			main := time.Duration(st.Clock.Players[0].MainMs) * time.Millisecond
			at := now.Add(main + tc.after)
			// The sweeper at every wake-up up to then.
			for st.WakeMs != 0 && st.WakeMs <= at.UnixMilli() {
				ch, applied, err := Expire(st, st.WakeMs, time.UnixMilli(st.WakeMs))
				if err != nil || !applied {
					t.Fatalf("expire at %v: %v %v", st.WakeMs, applied, err)
				}
				st = ch.State
			}
			if tc.wantFlag {
				if st.Status != StatusEnded || st.Result.Method != rules.Timeout {
					t.Fatalf("not flagged: %v", st.Status)
				}
				if st.EndedMs != at.UnixMilli() {
					t.Fatalf("flagged at %d, want %d", st.EndedMs, at.UnixMilli())
				}
				return
			}
			if st.Status != StatusOngoing {
				t.Fatalf("status %v %+v", st.Status, st.Result)
			}
			g := View(st, nil, at)
			if got := g.GetClocks().GetFirst().GetPeriodsLeft(); int(got) != tc.wantPeriods {
				t.Errorf("read: periods left %d, want %d", got, tc.wantPeriods)
			}
			ch, err := Move(st, rules.First, "a4a5", 0, at)
			if err != nil || ch.Reply != nil {
				t.Fatalf("move: %v %v", err, ch.Reply)
			}
			p := ch.State.Clock.Players[0]
			if p.Periods != tc.wantPeriods || p.PeriodMs != 5000 || p.MainMs != 0 {
				t.Errorf("after move: %+v, want %d periods", p, tc.wantPeriods)
			}
			var mp *gamev1.MoveRecord
			for _, e := range ch.Events {
				if e.GetMovePlayed() != nil {
					mp = e.GetMovePlayed()
				}
			}
			if got := mp.GetClocks().GetFirst().GetPeriodsLeft(); int(got) != tc.wantPeriods {
				t.Errorf("event: periods left %d, want %d", got, tc.wantPeriods)
			}
		})
	}
}

// TestRandomGamesNeverMissAWakeUp plays random games of both kinds, with
// setup, byo-yomi and Fischer, lag allowances, an AI seat, passes, draw
// offers, undos, holds and outage excuses, with a sweeper up to 400 ms
// late between commands: no deadline passes unhandled, each current
// wake-up is applied, a running clock always has one, no milestone is
// announced twice, and a move's event shows the clocks a later read and
// the stored clock show.
func TestRandomGamesNeverMissAWakeUp(t *testing.T) {
	controls := []clock.Control{
		{Kind: clock.ByoYomi, MainTime: 10 * time.Second, Periods: 3, PeriodTime: 5 * time.Second},
		{Kind: clock.ByoYomi, MainTime: 0, Periods: 2, PeriodTime: 3 * time.Second},
		{Kind: clock.Fischer, MainTime: 10 * time.Second, Increment: 2 * time.Second},
	}
	lags := []clock.LagPolicy{{}, serviceLag}
	ends := map[string]int{}
	defer func() { t.Log(ends) }()
	for seed := range 3000 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		variant := rules.Xiangqi
		if r.IntN(2) == 0 {
			variant = rules.Janggi
		}
		ctl := controls[r.IntN(len(controls))]
		p := CreateParams{ID: "z", Variant: variant, Control: &ctl, Lag: lags[r.IntN(2)], SetupTime: 10 * time.Second, FirstMoveTime: 10 * time.Second}
		if r.IntN(2) == 0 {
			p.Seats[1].AILevel = 1
		}
		now := time.UnixMilli(1_700_000_000_000)
		ch, err := Create(p, now)
		if err != nil {
			t.Fatal(err)
		}
		st := ch.State
		seen := map[string]bool{}
		var log []string
		note := func(what string, evs []*gamev1.Event) {
			log = append(log, fmt.Sprintf("%d %s", ms(now)-1_700_000_000_000, what))
			for _, e := range evs {
				if c := e.GetClock(); c != nil && c.GetKind() != gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED {
					k := fmt.Sprintf("%v %v %d", c.GetSide(), c.GetKind(), e.GetTime().AsTime().UnixMilli())
					if seen[k] {
						t.Fatalf("seed %d: milestone announced twice: %s\n%s", seed, k, strings.Join(log, "\n"))
					}
					seen[k] = true
				}
			}
		}
		defer func() {
			k := string(st.Status)
			if st.Result != nil {
				k += fmt.Sprint(st.Result.Method)
			}
			ends[k]++
		}()
		for step := 0; step < 150 && !st.Status.Finished(); step++ {
			delay := r.IntN(2500)
			if r.IntN(6) == 0 {
				delay = r.IntN(12000)
			}
			now = now.Add(time.Duration(delay) * time.Millisecond)
			// The sweeper, on time.
			for !st.Status.Finished() && st.WakeMs != 0 && st.WakeMs <= ms(now) {
				at := time.UnixMilli(min(st.WakeMs+int64(r.IntN(400)), ms(now)))
				ch, applied, err := Expire(st, st.WakeMs, at)
				if err != nil || !applied {
					t.Fatalf("seed %d: current wake-up %d not applied (%v)\n%s", seed, st.WakeMs, err, strings.Join(log, "\n"))
				}
				saved := now
				now = at
				note("expire", ch.Events)
				now = saved
				st = ch.State
			}
			if st.Status.Finished() {
				break
			}
			// Nothing is overdue now.
			if d := setupDeadline(st); d != 0 && ms(now) > d {
				t.Fatalf("seed %d: setup deadline passed unhandled", seed)
			}
			if d := firstMoveDeadline(st); d != 0 && ms(now) > d {
				t.Fatalf("seed %d: first-move deadline passed unhandled", seed)
			}
			if st.Status == StatusOngoing && st.Clock != nil && st.Clock.Flag(now) {
				t.Fatalf("seed %d: flag passed unhandled at +%d (wake %d)\n%s", seed, ms(now)-1_700_000_000_000, st.WakeMs-1_700_000_000_000, strings.Join(log, "\n"))
			}
			if st.Status == StatusOngoing && st.Clock != nil && st.Clock.Phase == clock.Running && st.WakeMs == 0 {
				t.Fatalf("seed %d: running clock without wake-up", seed)
			}
			side := st.Turn()
			var what string
			switch op := r.IntN(11); {
			case op == 10:
				what = "excuse"
				var ok bool
				ch, ok = Excuse(st, time.Duration(r.IntN(6000))*time.Millisecond, now)
				if !ok {
					continue
				}
				err = nil
			case st.Status == StatusSetup:
				what = "formation"
				ch, err = ChooseFormation(st, side, rules.Formation(1+r.IntN(4)), now)
			case op < 6:
				g, _ := st.Game()
				legal := g.LegalMoves()
				if len(legal) == 0 {
					continue
				}
				mv := legal[r.IntN(len(legal))].String()
				what = "move " + mv
				ch, err = Move(st, side, mv, time.Duration(r.IntN(1500))*time.Millisecond, now)
			case op == 6 && variant == rules.Janggi:
				what = "pass"
				ch, err = Pass(st, side, 0, now)
			case op == 6:
				what = "offer"
				ch, err = OfferDraw(st, rules.Side(r.IntN(2)), now)
			case op == 7 && variant == rules.Xiangqi:
				what = "decline"
				ch, err = AnswerDraw(st, rules.Side(r.IntN(2)), false, now)
			case op == 8:
				what = "undo"
				ch, err = Undo(st, rules.First, now)
			default:
				what = "hold"
				var ok bool
				ch, ok = Hold(st, rules.Side(r.IntN(2)), fmt.Sprint("p", r.IntN(3)))
				if !ok {
					continue
				}
				err = nil
			}
			if err != nil {
				continue
			}
			note(what, ch.Events)
			for _, e := range ch.Events {
				mp := e.GetMovePlayed()
				if mp == nil || ch.State.Clock == nil || ch.State.Status != StatusOngoing {
					continue
				}
				// What the event shows of the mover is what a later read
				// shows, and what the clock holds.
				later := View(ch.State, nil, now.Add(700*time.Millisecond)).GetClocks()
				ev, rd := mp.GetClocks().GetFirst(), later.GetFirst()
				held := ch.State.Clock.Players[0]
				if side == rules.Second {
					ev, rd, held = mp.GetClocks().GetSecond(), later.GetSecond(), ch.State.Clock.Players[1]
				}
				if ch.State.Clock.Phase == clock.Running && (ev.GetMainLeft().AsDuration() != rd.GetMainLeft().AsDuration() || ev.GetPeriodsLeft() != rd.GetPeriodsLeft() ||
					ev.GetPeriodLeft().AsDuration() != rd.GetPeriodLeft().AsDuration() || ev.GetMainLeft().AsDuration() != held.Main() || int(ev.GetPeriodsLeft()) != held.Periods) {
					t.Fatalf("seed %d: %s: event %v, later read %v, held %+v", seed, what, ev, rd, held)
				}
				if d := later.GetDeadline(); ch.State.Clock.Phase == clock.Running && (d == nil || !d.AsTime().Equal(mp.GetClocks().GetDeadline().AsTime())) {
					t.Fatalf("seed %d: %s: deadline event %v read %v", seed, what, mp.GetClocks().GetDeadline(), d)
				}
			}
			st = ch.State
		}
	}
}
