package clock

import "time"

// maxMs bounds every millisecond count the arithmetic works with. It is far
// beyond any real game (about 35,000 years) yet small enough that a budget
// summing a hundred such values, added to an instant, cannot overflow int64
// even when a corrupted state is fed in.
const maxMs = 1 << 50

// maxStartMs bounds the stored turn start (about ±1.1 million years) and
// maxUnixSec the instants passed in (±71 million years). The second range
// is wider than the first plus any budget, so that every deadline is an
// instant that "now" can still exceed.
const (
	maxStartMs = 1 << 55
	maxUnixSec = 1 << 51
)

func clampMs(v int64) int64 { return max(0, min(v, maxMs)) }

func msOf(d time.Duration) int64 { return clampMs(int64(d / time.Millisecond)) }

// unixMs floors t to the millisecond. Flooring (rather than time.UnixMilli's
// truncation towards 1970) keeps "sub-millisecond parts are dropped,
// rounding towards the past" true for every instant.
func unixMs(t time.Time) int64 {
	sec := t.Unix()
	if sec > maxUnixSec {
		return maxUnixSec * 1000
	}
	if sec < -maxUnixSec {
		return -maxUnixSec * 1000
	}
	return sec*1000 + int64(t.Nanosecond())/int64(time.Millisecond)
}

func clampInstant(ms int64) int64 { return max(-maxStartMs, min(ms, maxStartMs)) }

// instant converts back; UTC so that results do not depend on the host's
// time zone when logged or compared with ==.
func instant(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// rules holds what the arithmetic needs of a Control, in milliseconds.
type rules struct {
	kind     Kind
	periodMs int64
	incMs    int64
}

func rulesOf(c Control) rules {
	r := rules{kind: c.Kind}
	switch c.Kind {
	case ByoYomi:
		r.periodMs = msOf(c.PeriodTime)
	case Fischer:
		r.incMs = msOf(c.Increment)
	default:
		// An unknown kind has nothing to count down; it behaves as no clock
		// rather than guessing.
		r.kind = None
	}
	return r
}

func (r rules) timed() bool { return r.kind != None }

// norm clamps a stored player clock into a shape the arithmetic accepts, so
// that corrupted or hand-edited states cannot overflow or loop for long.
func (r rules) norm(p PlayerClock) PlayerClock {
	switch r.kind {
	case ByoYomi:
		p.MainMs = clampMs(p.MainMs)
		p.Periods = max(0, min(p.Periods, MaxPeriods))
		p.PeriodMs = max(0, min(p.PeriodMs, r.periodMs))
		p.InByoYomi = p.MainMs == 0
	case Fischer:
		p.MainMs = clampMs(p.MainMs)
		p.Periods, p.PeriodMs, p.InByoYomi = 0, 0, false
	}
	return p
}

// budget is the time p may still spend: main time, then what is left of the
// current period, then the remaining full periods. p must be normalised.
func (r rules) budget(p PlayerClock) int64 {
	b := p.MainMs
	if r.kind == ByoYomi && p.Periods > 0 {
		b += p.PeriodMs + int64(p.Periods-1)*r.periodMs
	}
	return b
}

// spend charges e milliseconds, 0 <= e <= budget(p), to a normalised p.
func (r rules) spend(p PlayerClock, e int64) PlayerClock {
	if e <= p.MainMs {
		p.MainMs -= e
	} else {
		e -= p.MainMs
		p.MainMs = 0
		if e <= p.PeriodMs {
			p.PeriodMs -= e
		} else {
			// The current period is gone and e > 0 spills into the next
			// ones; e <= budget guarantees periodMs > 0 and at least one
			// period left afterwards.
			e -= p.PeriodMs
			lost := 1 + (e-1)/r.periodMs
			p.Periods -= int(lost)
			p.PeriodMs = r.periodMs - (e - (lost-1)*r.periodMs)
		}
	}
	p.InByoYomi = r.kind == ByoYomi && p.MainMs == 0
	return p
}

// flagged is p once out of time: nothing left, and the flag set.
func (r rules) flagged(p PlayerClock) PlayerClock {
	p.MainMs, p.Periods, p.PeriodMs = 0, 0, 0
	p.InByoYomi = r.kind == ByoYomi
	p.Flagged = true
	return p
}

// view is p after e milliseconds of its turn without a move: flagged past
// budget+grace, and held at zero during the grace (a lagged move may still
// arrive in time).
func (r rules) view(p PlayerClock, e, grace int64) PlayerClock {
	b := r.budget(p)
	if e > b+grace {
		return r.flagged(p)
	}
	return r.spend(p, min(e, b))
}
