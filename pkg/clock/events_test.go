package clock

import (
	"encoding/json"
	"testing"
	"time"
)

// ev is an expected event, its instant in ms from t0.
type ev struct {
	kind EventKind
	at   int64
	left int
}

func TestEvents(t *testing.T) {
	tests := []struct {
		name     string
		control  Control
		lag      LagPolicy
		setup    func(State) State
		from, to int64
		want     []ev
	}{
		{name: "whole default turn", control: Default(), from: 0, to: 1 << 40, want: []ev{
			{EnteredByoYomi, 5 * mins, 3},
			{PeriodUsed, 5*mins + 30*sec + 1, 2},
			{PeriodUsed, 6*mins + 1, 1},
			{Flagged, 6*mins + 30*sec + 1, 0},
		}},
		{name: "half-open: from excludes, to includes", control: Default(), from: 5 * mins, to: 5*mins + 30*sec + 1, want: []ev{
			{PeriodUsed, 5*mins + 30*sec + 1, 2},
		}},
		{name: "up to the end of a period excludes its loss", control: Default(), from: 0, to: 5*mins + 30*sec, want: []ev{
			{EnteredByoYomi, 5 * mins, 3},
		}},
		{name: "empty interval", control: Default(), from: 6 * mins, to: 6 * mins, want: nil},
		{name: "reversed interval", control: Default(), from: 7 * mins, to: 1 * mins, want: nil},
		{name: "pure byo-yomi has no entry event", control: pureByo, from: -1, to: 1 << 40, want: []ev{
			{PeriodUsed, 30*sec + 1, 2},
			{PeriodUsed, 60*sec + 1, 1},
			{Flagged, 90*sec + 1, 0},
		}},
		{name: "partial period after a pause", control: Default(),
			setup: withFirst(PlayerClock{Periods: 2, PeriodMs: 10 * sec, InByoYomi: true}), from: 0, to: 1 << 40, want: []ev{
				{PeriodUsed, 10*sec + 1, 1},
				{Flagged, 40*sec + 1, 0},
			}},
		{name: "last period: only the flag", control: Default(),
			setup: withFirst(PlayerClock{Periods: 1, PeriodMs: 30 * sec, InByoYomi: true}), from: 0, to: 1 << 40, want: []ev{
				{Flagged, 30*sec + 1, 0},
			}},
		{name: "single period control", control: Control{Kind: ByoYomi, MainTime: time.Minute, Periods: 1, PeriodTime: 10 * time.Second}, from: 0, to: 1 << 40, want: []ev{
			{EnteredByoYomi, 1 * mins, 1},
			{Flagged, 1*mins + 10*sec + 1, 0},
		}},
		{name: "fischer: only the flag", control: fischer3p2, from: 0, to: 1 << 40, want: []ev{
			{Flagged, 3*mins + 1, 0},
		}},
		{name: "lag grace delays only the flag", control: Default(), lag: lag1s, from: 0, to: 1 << 40, want: []ev{
			{EnteredByoYomi, 5 * mins, 3},
			{PeriodUsed, 5*mins + 30*sec + 1, 2},
			{PeriodUsed, 6*mins + 1, 1},
			{Flagged, 6*mins + 31*sec + 1, 0},
		}},
		{name: "no clock", control: Control{}, from: 0, to: 1 << 40, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := started(t, tt.control, tt.lag)
			if tt.setup != nil {
				s = tt.setup(s)
			}
			got := s.Events(at(tt.from), at(tt.to))
			if len(got) != len(tt.want) {
				t.Fatalf("Events = %v, want %v", got, tt.want)
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Kind != w.kind || !g.At.Equal(at(w.at)) || g.PeriodsLeft != w.left || g.Side != First {
					t.Errorf("event %d = %+v, want %v at %v with %d left", i, g, w.kind, at(w.at), w.left)
				}
			}
			checkEventsMatchSnapshots(t, s, got)
		})
	}
}

// checkEventsMatchSnapshots checks that each event is the first instant at
// which Snapshot and Flag show it.
func checkEventsMatchSnapshots(t *testing.T, s State, evs []Event) {
	t.Helper()
	side := s.Turn
	for _, e := range evs {
		now := s.Snapshot(e.At).Players[side]
		before := s.Snapshot(e.At.Add(-time.Millisecond)).Players[side]
		switch e.Kind {
		case EnteredByoYomi:
			if !now.InByoYomi || before.InByoYomi || now.Periods != e.PeriodsLeft || now.PeriodMs != s.Control.PeriodTime.Milliseconds() {
				t.Errorf("%v: snapshot before %+v, at %+v", e.Kind, before, now)
			}
		case PeriodUsed:
			if now.Periods != e.PeriodsLeft || before.Periods != e.PeriodsLeft+1 || before.PeriodMs != 0 {
				t.Errorf("%v: snapshot before %+v, at %+v", e.Kind, before, now)
			}
		case Flagged:
			if !now.Flagged || before.Flagged || !s.Flag(e.At) || s.Flag(e.At.Add(-time.Millisecond)) {
				t.Errorf("%v: snapshot before %+v, at %+v", e.Kind, before, now)
			}
			if d, _ := s.Deadline(); !d.Add(time.Millisecond).Equal(e.At) {
				t.Errorf("flag event at %v, deadline %v", e.At, d)
			}
		}
	}
}

func TestNextMilestone(t *testing.T) {
	tests := []struct {
		name     string
		control  Control
		now      int64
		wantKind EventKind
		wantAt   int64
		wantOK   bool
	}{
		{"from the start", Default(), 0, EnteredByoYomi, 5 * mins, true},
		{"at the entry instant, the next one", Default(), 5 * mins, PeriodUsed, 5*mins + 30*sec + 1, true},
		{"1ms before a period loss", Default(), 5*mins + 30*sec, PeriodUsed, 5*mins + 30*sec + 1, true},
		{"at the deadline", Default(), 6*mins + 30*sec, Flagged, 6*mins + 30*sec + 1, true},
		{"already flagged", Default(), 6*mins + 30*sec + 1, 0, 0, false},
		{"fischer", fischer3p2, 10 * sec, Flagged, 3*mins + 1, true},
		{"before the turn start", Default(), -time.Hour.Milliseconds(), EnteredByoYomi, 5 * mins, true},
		{"no clock", Control{}, 0, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := started(t, tt.control, LagPolicy{})
			gotAt, gotKind, ok := s.NextMilestone(at(tt.now))
			if ok != tt.wantOK || gotKind != tt.wantKind || (ok && !gotAt.Equal(at(tt.wantAt))) || (!ok && !gotAt.IsZero()) {
				t.Errorf("NextMilestone = %v, %v, %v; want %v, %v, %v", gotAt, gotKind, ok, at(tt.wantAt), tt.wantKind, tt.wantOK)
			}
		})
	}
}

// TestSweeperLoop plays the service's loop: sleep until the next milestone,
// emit what happened since the last wake-up, stop once flagged.
func TestSweeperLoop(t *testing.T) {
	s := started(t, Default(), LagPolicy{})
	last := t0
	var kinds []EventKind
	for range 10 {
		next, _, ok := s.NextMilestone(last)
		if !ok {
			break
		}
		for _, e := range s.Events(last, next) {
			kinds = append(kinds, e.Kind)
		}
		last = next
		if s.Flag(next) {
			break
		}
	}
	want := []EventKind{EnteredByoYomi, PeriodUsed, PeriodUsed, Flagged}
	if len(kinds) != len(want) {
		t.Fatalf("sweeper saw %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("sweeper saw %v, want %v", kinds, want)
		}
	}
}

func TestEventJSON(t *testing.T) {
	e := Event{Kind: PeriodUsed, Side: Second, At: at(1500), PeriodsLeft: 2}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"kind":"period_used","side":1,"at":"2025-03-01T12:00:01.5Z","periods_left":2}`; string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
	var back Event
	if err := json.Unmarshal(b, &back); err != nil || back != e {
		t.Errorf("round trip = %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"kind":"tick"}`), &back); err == nil {
		t.Error("unknown event kind accepted")
	}
	if EventKind(0).String() != "event(0)" || Flagged.String() != "flagged" {
		t.Error("EventKind.String")
	}
}
