package clock

import (
	"fmt"
	"strconv"
	"time"
)

// EventKind is a clock milestone of the running side.
type EventKind uint8

// Milestones, in the order they can happen within one turn.
const (
	// EnteredByoYomi: main time reached zero; the first period starts.
	EnteredByoYomi EventKind = iota + 1
	// PeriodUsed: a whole period ran out and another one started.
	PeriodUsed
	// Flagged: the player lost on time. Running out of the last period is
	// reported as Flagged, not as PeriodUsed.
	Flagged
)

var eventNames = [...]string{EnteredByoYomi: "entered_byoyomi", PeriodUsed: "period_used", Flagged: "flagged"}

func (k EventKind) String() string {
	if k >= EnteredByoYomi && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "event(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText encodes the kind by name.
func (k EventKind) MarshalText() ([]byte, error) {
	if k < EnteredByoYomi || int(k) >= len(eventNames) {
		return nil, fmt.Errorf("clock: cannot encode unknown %v", k)
	}
	return []byte(eventNames[k]), nil
}

// UnmarshalText is the inverse of MarshalText.
func (k *EventKind) UnmarshalText(b []byte) error {
	for i, n := range eventNames {
		if n != "" && string(b) == n {
			*k = EventKind(i)
			return nil
		}
	}
	return fmt.Errorf("clock: unknown event kind %q", b)
}

// Event is a milestone of the running side's turn.
type Event struct {
	Kind EventKind `json:"kind"`
	Side Side      `json:"side"`
	// At is the first instant at which Snapshot shows the milestone: the
	// instant main time reaches zero for EnteredByoYomi, one millisecond
	// after the boundary for PeriodUsed and Flagged (see the boundary rule).
	At time.Time `json:"at"`
	// PeriodsLeft after the event, the current period included.
	PeriodsLeft int `json:"periods_left"`
}

// milestones lists every milestone of the current turn in time order; at
// most MaxPeriods+1 because norm caps the periods.
func (s State) milestones() []Event {
	deadline, ok := s.deadlineMs()
	if !ok {
		return nil
	}
	r := rulesOf(s.Control)
	p := r.norm(s.Players[s.Turn])
	start := s.chargedFrom()
	flagAt := deadline + 1
	var evs []Event
	add := func(k EventKind, at int64, left int) {
		evs = append(evs, Event{Kind: k, Side: s.Turn, At: instant(at), PeriodsLeft: left})
	}
	if r.kind == ByoYomi && p.Periods > 0 {
		if p.MainMs > 0 {
			add(EnteredByoYomi, start+p.MainMs, p.Periods)
		}
		end := start + p.MainMs + p.PeriodMs // end of the current period
		for left := p.Periods - 1; left >= 1; left-- {
			// Only a corrupt zero-length period could reach the flag.
			if end+1 >= flagAt {
				break
			}
			add(PeriodUsed, end+1, left)
			end += r.periodMs
		}
	}
	add(Flagged, flagAt, 0)
	return evs
}

// Events lists the running side's milestones with from < At <= to, in time
// order. The half-open interval lets a sweeper call Events(lastWake, now)
// repeatedly and see each milestone exactly once. Nil when no clock runs.
func (s State) Events(from, to time.Time) []Event {
	lo, hi := unixMs(from), unixMs(to)
	var out []Event
	for _, e := range s.milestones() {
		if at := unixMs(e.At); at > lo && at <= hi {
			out = append(out, e)
		}
	}
	return out
}

// NextMilestone is the first milestone strictly after now: when the
// service should wake up next, and what it will find. ok is false when no
// clock runs, the control is None, or the running side is already flagged.
func (s State) NextMilestone(now time.Time) (at time.Time, kind EventKind, ok bool) {
	n := unixMs(now)
	for _, e := range s.milestones() {
		if unixMs(e.At) > n {
			return e.At, e.Kind, true
		}
	}
	return time.Time{}, 0, false
}
