package clock

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

func msDur(ms uint64) time.Duration { return time.Duration(ms) * time.Millisecond }

// genControl maps arbitrary numbers onto a valid control, with small values
// likelier so that think times straddle the interesting boundaries.
func genControl(kind uint8, a, b, c uint64) Control {
	switch kind % 4 {
	case 0:
		return Control{}
	case 1:
		return Control{Kind: ByoYomi, MainTime: msDur(a % (10*60_000 + 1)), Periods: 1 + int(b%5), PeriodTime: msDur(1000 + c%60_000)}
	case 2:
		// The extremes: up to 24h and 100 periods of up to an hour.
		return Control{Kind: ByoYomi, MainTime: msDur(a % uint64(MaxMainTime.Milliseconds()+1)), Periods: 1 + int(b%MaxPeriods),
			PeriodTime: msDur(1000 + c%uint64(MaxPeriodTime.Milliseconds()-999))}
	default:
		inc := b % 30_001
		if c%2 == 0 {
			inc = 0 // sudden death
		}
		return Control{Kind: Fischer, MainTime: msDur(1000 + a%(10*60_000)), Increment: msDur(inc)}
	}
}

func genLag(on bool, a, b, c uint64) LagPolicy {
	if !on {
		return LagPolicy{}
	}
	cap := a % (5_000 + 1)
	return LagPolicy{MaxPerMove: msDur(b % (2_000 + 1)), BankCap: msDur(cap), RefillPerMove: msDur(c % (cap + 1))}
}

// budgetOf is what the running side may still spend, grace excluded.
func budgetOf(s State) int64 {
	r := rulesOf(s.Control)
	return r.budget(r.norm(s.Players[s.Turn]))
}

// pickThink chooses a think time, often exactly on a boundary or one
// millisecond either side of it.
func pickThink(rng *rand.Rand, s State) int64 {
	p := s.Players[s.Turn]
	budget := budgetOf(s)
	grace := s.Lag.graceMs(p.LagBankMs)
	boundaries := []int64{0, p.MainMs, budget, budget + grace}
	if s.Control.Kind == ByoYomi {
		for j := int64(0); j < int64(p.Periods); j++ {
			boundaries = append(boundaries, p.MainMs+p.PeriodMs+j*s.Control.PeriodTime.Milliseconds())
		}
	}
	switch rng.IntN(4) {
	case 0:
		return rng.Int64N(budget + grace + 2)
	case 1:
		return rng.Int64N(min(budget+1, 60_000)) // quick moves keep games going
	default:
		return max(0, boundaries[rng.IntN(len(boundaries))]+rng.Int64N(3)-1)
	}
}

func pickLag(rng *rand.Rand) time.Duration {
	switch rng.IntN(5) {
	case 0:
		return 0
	case 1:
		return -msDur(rng.Uint64N(5_000))
	case 2:
		return MaxReportedLag + msDur(rng.Uint64N(5_000))
	default:
		return msDur(rng.Uint64N(3_000))
	}
}

// expectedCredit restates the lag rule independently of the implementation.
func expectedCredit(l LagPolicy, bank int64, reported time.Duration, elapsed int64) int64 {
	if reported < 0 || reported > MaxReportedLag {
		return 0
	}
	bank = max(0, min(bank, l.BankCap.Milliseconds()))
	return min(reported.Milliseconds(), l.MaxPerMove.Milliseconds(), bank, elapsed)
}

// playGame checks the invariants at every move of a random game and
// returns how many moves it played.
func playGame(t *testing.T, rng *rand.Rand, c Control, l LagPolicy, maxMoves int) int {
	t.Helper()
	s, err := New(c).WithLag(l).Start(at(rng.Int64N(1_000_000)), Side(rng.IntN(2)))
	if err != nil {
		t.Fatal(err)
	}
	for move := 0; move < maxMoves; move++ {
		checkState(t, s)
		start := instant(s.TurnStartMs)
		mover := s.Turn
		p := s.Players[mover]
		think := pickThink(rng, s)
		now := start.Add(time.Duration(think) * time.Millisecond)
		lag := pickLag(rng)

		if rng.IntN(10) == 0 {
			// Stop keeps exactly what Snapshot shows; Start resumes it.
			stopped := s.Stop(now)
			if stopped.Players != s.Snapshot(now).Players || stopped.Phase != Stopped {
				t.Fatalf("Stop(%v) = %+v, Snapshot %+v", now, stopped.Players, s.Snapshot(now).Players)
			}
			if err := stopped.Validate(); err != nil {
				t.Fatalf("stopped state invalid: %v\n%+v", err, stopped)
			}
			resumed, err := stopped.Start(now.Add(time.Hour), mover)
			if stopped.Players[mover].Flagged {
				if !errors.Is(err, ErrFlagged) {
					t.Fatalf("resuming a flagged game: %v", err)
				}
				return move
			}
			if err != nil {
				t.Fatal(err)
			}
			s = resumed
			continue
		}

		// Snapshot equals what a move without credit would charge.
		budget := budgetOf(s)
		if think <= budget {
			snap := s.Snapshot(now).Players[mover]
			moved, err := s.Move(now, 0)
			if err != nil {
				t.Fatalf("Move within the budget: %v", err)
			}
			checkMoved(t, s, snap, moved.Players[mover], 0)
		}

		next, err := s.Move(now, lag)
		credit := expectedCredit(s.Lag, p.LagBankMs, lag, think)
		if credit > s.Lag.MaxPerMove.Milliseconds() || credit > think || credit < 0 {
			t.Fatalf("credit %d out of bounds", credit)
		}
		if c.Kind == None {
			if err != nil || next.Players != s.Players || next.Turn != mover.Opponent() {
				t.Fatalf("no clock Move = %+v, %v", next, err)
			}
		} else if think-credit > budget {
			var fe *FlagError
			if !errors.As(err, &fe) {
				t.Fatalf("think %d - credit %d > budget %d but Move = %v", think, credit, budget, err)
			}
			if want := start.Add(time.Duration(budget+credit) * time.Millisecond); !fe.Deadline.Equal(want) || fe.Side != mover {
				t.Fatalf("FlagError = %+v, want deadline %v", fe, want)
			}
			if next.Phase != Stopped || !next.Players[mover].Flagged {
				t.Fatalf("after a flag: %+v", next)
			}
			checkState(t, next)
			return move
		} else {
			if err != nil {
				t.Fatalf("think %d - credit %d <= budget %d but Move = %v", think, credit, budget, err)
			}
			// The move charges exactly think-credit: what Snapshot showed
			// credit milliseconds earlier.
			earlier := s.Snapshot(now.Add(-time.Duration(credit) * time.Millisecond)).Players[mover]
			checkMoved(t, s, earlier, next.Players[mover], credit)
		}
		if next.Turn != mover.Opponent() || next.Players[mover.Opponent()] != s.Players[mover.Opponent()] || next.TurnStartMs != unixMs(now) {
			t.Fatalf("Move did not hand over cleanly: %+v -> %+v", s, next)
		}
		s = next
	}
	return maxMoves
}

// checkMoved compares the mover after a Move with the Snapshot it was
// charged from.
func checkMoved(t *testing.T, s State, snap, moved PlayerClock, credit int64) {
	t.Helper()
	want := snap
	switch s.Control.Kind {
	case ByoYomi:
		want.PeriodMs = s.Control.PeriodTime.Milliseconds()
	case Fischer:
		want.MainMs += s.Control.Increment.Milliseconds()
	}
	bank := s.Players[s.Turn].LagBankMs
	want.LagBankMs = min(bank-credit+s.Lag.RefillPerMove.Milliseconds(), s.Lag.BankCap.Milliseconds())
	if s.Control.Kind == None {
		want.LagBankMs = bank
	}
	if moved != want {
		t.Fatalf("Move charged %+v, want %+v (snapshot %+v, credit %d)", moved, want, snap, credit)
	}
	if moved.LagBankMs < 0 || moved.LagBankMs > s.Lag.BankCap.Milliseconds() {
		t.Fatalf("bank %d outside 0..%v", moved.LagBankMs, s.Lag.BankCap)
	}
}

// checkState checks the invariants of a state that is not being moved.
func checkState(t *testing.T, s State) {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatalf("invalid state: %v\n%+v", err, s)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := json.Unmarshal(b, &back); err != nil || back != s {
		t.Fatalf("JSON round trip: %+v, %v; want %+v", back, err, s)
	}
	d, ok := s.Deadline()
	if ok != (s.Phase == Running && s.Control.Kind != None) {
		t.Fatalf("Deadline ok = %v for %v %v", ok, s.Phase, s.Control.Kind)
	}
	if !ok {
		return
	}
	start := instant(s.TurnStartMs)
	if s.Flag(start) && !d.Before(start) || s.Flag(d) || !s.Flag(d.Add(time.Millisecond)) {
		t.Fatalf("Flag inconsistent with deadline %v (start %v)", d, start)
	}
	// Deadline is start + budget + grace.
	grace := s.Lag.graceMs(s.Players[s.Turn].LagBankMs)
	if want := start.Add(time.Duration(budgetOf(s)+grace) * time.Millisecond); !d.Equal(want) {
		t.Fatalf("Deadline %v, want %v", d, want)
	}
	evs := s.Events(start.Add(-time.Millisecond), d.Add(time.Millisecond))
	if len(evs) == 0 || evs[len(evs)-1].Kind != Flagged || !evs[len(evs)-1].At.Equal(d.Add(time.Millisecond)) {
		t.Fatalf("Events do not end with the flag at %v: %v", d.Add(time.Millisecond), evs)
	}
	for i, e := range evs {
		if i > 0 && !evs[i-1].At.Before(e.At) {
			t.Fatalf("Events not strictly increasing: %v", evs)
		}
		if at, kind, ok := s.NextMilestone(e.At.Add(-time.Millisecond)); !ok || !at.Equal(e.At) || kind != e.Kind {
			t.Fatalf("NextMilestone before %+v = %v %v %v", e, at, kind, ok)
		}
	}
	if all := s.Events(start.Add(-time.Hour), d.Add(time.Hour)); len(all) != len(evs) {
		t.Fatalf("events outside the turn: %v", all)
	}
	checkEventsMatchSnapshots(t, s, evs)
	// Time left never grows while the clock runs.
	r := rulesOf(s.Control)
	prev := int64(1 << 62)
	for _, f := range []float64{0, 0.1, 0.5, 0.9, 1, 1.1} {
		when := start.Add(time.Duration(float64(d.Sub(start)) * f).Truncate(time.Millisecond))
		snap := s.Snapshot(when).Players[s.Turn]
		left := r.budget(snap)
		if snap.Flagged {
			left = -1
		}
		if left > prev {
			t.Fatalf("time left grew to %d at %v", left, when)
		}
		prev = left
	}
}

func TestProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	moves, games := 0, 3000
	if testing.Short() {
		games = 300
	}
	for i := range games {
		c := genControl(uint8(rng.Uint32()), rng.Uint64(), rng.Uint64(), rng.Uint64())
		l := genLag(rng.IntN(2) == 0, rng.Uint64(), rng.Uint64(), rng.Uint64())
		if err := errors.Join(c.Validate(), l.Validate()); err != nil {
			t.Fatalf("game %d: generated an invalid setup: %v", i, err)
		}
		moves += playGame(t, rng, c, l, 60)
	}
	t.Logf("%d moves checked", moves)
}

func FuzzClock(f *testing.F) {
	f.Add(uint64(1), uint8(1), uint64(300_000), uint64(2), uint64(29_000), false, uint64(0), uint64(0), uint64(0))
	f.Add(uint64(2), uint8(3), uint64(180_000), uint64(2_000), uint64(1), true, uint64(3_000), uint64(1_000), uint64(500))
	f.Add(uint64(3), uint8(2), uint64(0), uint64(99), uint64(0), true, uint64(0), uint64(5_000), uint64(0))
	f.Add(uint64(4), uint8(0), uint64(0), uint64(0), uint64(0), false, uint64(0), uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, seed uint64, kind uint8, a, b, c uint64, lagOn bool, la, lb, lc uint64) {
		ctl, lag := genControl(kind, a, b, c), genLag(lagOn, la, lb, lc)
		if err := errors.Join(ctl.Validate(), lag.Validate()); err != nil {
			t.Fatalf("generated an invalid setup: %v", err)
		}
		playGame(t, rand.New(rand.NewPCG(seed, uint64(kind))), ctl, lag, 30)
	})
}

// FuzzState feeds arbitrary stored states: no method may panic, valid
// ones keep every invariant, and what a method makes of a valid one is
// valid too (it is stored in its place).
func FuzzState(f *testing.F) {
	s, _ := New(Default()).WithLag(lag1s).Start(t0, First)
	b, _ := json.Marshal(s)
	f.Add(b, int64(100_000))
	f.Add([]byte(`{"control":{"kind":"byoyomi","period_ms":1000,"periods":100},"phase":"running","turn":1,"turn_start_ms":-9223372036854775808,"players":[{"main_ms":9223372036854775807,"periods":-5},{"periods":1000000000000}]}`), int64(-1))
	f.Add([]byte(`{"control":{"kind":"fischer","main_ms":1000},"phase":"running","turn":7,"players":[{},{}]}`), int64(1<<62))
	f.Fuzz(func(t *testing.T, data []byte, offset int64) {
		var s State
		if json.Unmarshal(data, &s) != nil {
			return
		}
		now := time.UnixMilli(s.TurnStartMs).Add(time.Duration(offset%(1<<50)) * time.Millisecond)
		_ = s.Snapshot(now)
		_, _ = s.Deadline()
		_ = s.Flag(now)
		_ = s.Events(time.UnixMilli(s.TurnStartMs), now)
		_, _, _ = s.NextMilestone(now)
		_, _ = s.Move(now, time.Duration(offset))
		_ = s.Stop(now)
		_, _ = s.Start(now, First)
		if s.Validate() == nil {
			checkState(t, s)
			moved, _ := s.Move(now, time.Duration(offset))
			yielded, _ := s.Yield(now)
			started, _ := s.Start(now, Side(offset&1))
			taken, _ := s.TakeBack(now, [2]Earned{
				{MainMs: offset % 60_000, PeriodMs: offset / 3 % 60_000, LagMs: offset / 5 % 60_000},
				{MainMs: offset / 7 % 60_000, PeriodMs: offset / 11 % 60_000, LagMs: offset / 13 % 60_000},
			})
			for _, next := range []State{moved, yielded, s.Stop(now), started, taken} {
				checkState(t, next)
			}
			if s.Phase == Running {
				playGame(t, rand.New(rand.NewPCG(uint64(offset), 0)), s.Control, s.Lag, 5)
			}
		}
	})
}
