package clock

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Kind is the family of a time control.
type Kind uint8

// Kinds of time control. The zero value is None so that a zero Control is
// the (valid) "no clock" control.
const (
	None Kind = iota
	ByoYomi
	Fischer
)

var kindNames = [...]string{None: "none", ByoYomi: "byoyomi", Fischer: "fischer"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText encodes the kind by name so that stored states stay readable.
func (k Kind) MarshalText() ([]byte, error) {
	if int(k) >= len(kindNames) {
		return nil, fmt.Errorf("clock: cannot encode unknown %v", k)
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText is the inverse of MarshalText.
func (k *Kind) UnmarshalText(b []byte) error {
	for i, n := range kindNames {
		if string(b) == n {
			*k = Kind(i)
			return nil
		}
	}
	return fmt.Errorf("clock: unknown time control kind %q", b)
}

// Bounds enforced by [Control.Validate]. They keep every budget far from
// integer overflow and reject configurations no one would play.
const (
	MaxMainTime    = 24 * time.Hour
	MinFischerMain = time.Second // a Fischer game with no main time would flag on the first move
	MaxPeriods     = 100
	MinPeriodTime  = time.Second
	MaxPeriodTime  = time.Hour
	MaxIncrement   = time.Hour
)

// ErrInvalidControl is wrapped by every error of [Control.Validate] and
// [ParseControl].
var ErrInvalidControl = errors.New("invalid time control")

// Control describes a time control. Durations must be whole milliseconds
// because the State stores milliseconds.
//
// Periods counts all byo-yomi periods, so the online default "5m+3x30s"
// gives 5 minutes, then three periods of 30 seconds: a move within a
// period keeps it, a turn that outlasts one uses it up, and outlasting
// the last loses on time (two overruns survive, the third does not).
// Unused fields
// of a kind must be zero so that one control has one representation.
type Control struct {
	Kind       Kind
	MainTime   time.Duration
	Periods    int
	PeriodTime time.Duration
	Increment  time.Duration
}

// Default is the control of online games: 5 minutes and 3 periods of 30
// seconds of byo-yomi.
func Default() Control {
	return Control{Kind: ByoYomi, MainTime: 5 * time.Minute, Periods: 3, PeriodTime: 30 * time.Second}
}

// Validate reports every problem of c at once, on one line (they end up
// in status messages), each wrapping ErrInvalidControl; nil means valid.
func (c Control) Validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidControl}, args...)...))
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"main time", c.MainTime}, {"period time", c.PeriodTime}, {"increment", c.Increment}} {
		switch {
		case f.d < 0:
			add("%s %s is negative", f.name, formatDuration(f.d))
		case f.d > MaxMainTime:
			// Reported below, against its bound. A Duration that came
			// saturated from a far longer one is no whole millisecond.
		case f.d%time.Millisecond != 0:
			add("%s %v is not a whole number of milliseconds", f.name, f.d)
		}
	}
	if c.Periods < 0 {
		add("periods %d is negative", c.Periods)
	}
	if c.MainTime > MaxMainTime {
		add("main time %s exceeds %s", formatDuration(c.MainTime), formatDuration(MaxMainTime))
	}
	switch c.Kind {
	case None:
		if c.MainTime != 0 {
			add("no-clock control has a main time")
		}
		if c.Periods != 0 || c.PeriodTime != 0 {
			add("no-clock control has byo-yomi periods")
		}
		if c.Increment != 0 {
			add("no-clock control has an increment")
		}
	case ByoYomi:
		if c.Periods < 1 || c.Periods > MaxPeriods {
			add("byo-yomi needs 1 to %d periods, got %d", MaxPeriods, c.Periods)
		}
		// A negative one is reported as such, above.
		if (c.PeriodTime >= 0 && c.PeriodTime < MinPeriodTime) || c.PeriodTime > MaxPeriodTime {
			add("byo-yomi period %s is outside %s..%s", formatDuration(c.PeriodTime), formatDuration(MinPeriodTime), formatDuration(MaxPeriodTime))
		}
		if c.Increment != 0 {
			add("byo-yomi control has an increment")
		}
	case Fischer:
		if c.MainTime >= 0 && c.MainTime < MinFischerMain {
			add("Fischer main time %s is below %s", formatDuration(c.MainTime), formatDuration(MinFischerMain))
		}
		if c.Increment > MaxIncrement {
			add("increment %s exceeds %s", formatDuration(c.Increment), formatDuration(MaxIncrement))
		}
		if c.Periods != 0 || c.PeriodTime != 0 {
			add("Fischer control has byo-yomi periods")
		}
	default:
		add("unknown kind %d", uint8(c.Kind))
	}
	if len(errs) == 0 {
		return nil
	}
	return problems(errs)
}

// problems are several errors, read on one line: "invalid time control: "
// once, then each problem.
type problems []error

func (p problems) Error() string {
	prefix := ErrInvalidControl.Error() + ": "
	msgs := make([]string, len(p))
	for i, e := range p {
		msgs[i] = strings.TrimPrefix(e.Error(), prefix)
	}
	return prefix + strings.Join(msgs, "; ")
}

func (p problems) Unwrap() []error { return p }

// String formats c as "none", "5m+3x30s" (byo-yomi) or "3m+2s" (Fischer;
// "10m+0s" is sudden death). ParseControl(c.String()) returns c for every
// valid c.
func (c Control) String() string {
	switch c.Kind {
	case None:
		return "none"
	case ByoYomi:
		return formatDuration(c.MainTime) + "+" + strconv.Itoa(c.Periods) + "x" + formatDuration(c.PeriodTime)
	case Fischer:
		return formatDuration(c.MainTime) + "+" + formatDuration(c.Increment)
	}
	return c.Kind.String()
}

// ParseControl parses the format of [Control.String]. It also accepts
// non-canonical spellings ("90s" for "1m30s", "3x30s" for byo-yomi without
// main time, "10m" for sudden death, surrounding spaces, upper case) and
// returns only valid controls.
func ParseControl(s string) (Control, error) {
	c, err := parseControl(strings.ToLower(strings.TrimSpace(s)))
	if err != nil {
		return Control{}, fmt.Errorf("%w: %q: %w", ErrInvalidControl, s, err)
	}
	if err := c.Validate(); err != nil {
		return Control{}, fmt.Errorf("parse %q: %w", s, err)
	}
	return c, nil
}

func parseControl(s string) (Control, error) {
	if s == "none" {
		return Control{}, nil
	}
	mainPart, rest, hasPlus := strings.Cut(s, "+")
	if !hasPlus {
		// The shorthands: "3x30s" has no main time, "10m" no increment.
		if strings.Contains(s, "x") {
			mainPart, rest = "0s", s
		} else {
			mainPart, rest = s, "0s"
		}
	}
	main, err := parseDuration(mainPart)
	if err != nil {
		return Control{}, fmt.Errorf("main time: %w", err)
	}
	if ps, pt, ok := strings.Cut(rest, "x"); ok {
		n, err := parseDigits(ps, 4)
		if err != nil {
			return Control{}, fmt.Errorf("periods: %w", err)
		}
		period, err := parseDuration(pt)
		if err != nil {
			return Control{}, fmt.Errorf("period time: %w", err)
		}
		return Control{Kind: ByoYomi, MainTime: main, Periods: int(n), PeriodTime: period}, nil
	}
	inc, err := parseDuration(rest)
	if err != nil {
		return Control{}, fmt.Errorf("increment: %w", err)
	}
	return Control{Kind: Fischer, MainTime: main, Increment: inc}, nil
}

// durationUnits are in the only order parseDuration accepts, so that every
// duration has few spellings and the canonical one is obvious.
var durationUnits = []struct {
	name string
	ms   int64
}{{"h", 3_600_000}, {"m", 60_000}, {"s", 1000}, {"ms", 1}}

// parseDuration reads e.g. "1h30m", "45s", "1s500ms" or "0". It is not
// time.ParseDuration because that accepts fractions, signs and units below a
// millisecond, none of which the state can store.
func parseDuration(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	if s == "" {
		return 0, errors.New("empty duration")
	}
	var total int64
	next := 0 // index of the first unit still allowed
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		n, err := parseDigits(s[:i], 9)
		if err != nil {
			return 0, err
		}
		s = s[i:]
		u := -1
		for j := next; j < len(durationUnits); j++ {
			name := durationUnits[j].name
			// "m" must not swallow the "m" of "ms".
			if strings.HasPrefix(s, name) && !(name == "m" && strings.HasPrefix(s, "ms")) {
				u = j
				break
			}
		}
		if u < 0 {
			return 0, fmt.Errorf("expected a unit (h, m, s, ms, in that order) at %q", s)
		}
		s = s[len(durationUnits[u].name):]
		total += n * durationUnits[u].ms // n < 1e9, so no overflow
		next = u + 1
	}
	return time.Duration(total) * time.Millisecond, nil
}

func parseDigits(s string, maxDigits int) (int64, error) {
	if s == "" {
		return 0, errors.New("expected a number")
	}
	if len(s) > maxDigits {
		return 0, fmt.Errorf("number %s is too long", s)
	}
	var n int64
	for _, r := range []byte(s) {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("bad number %q", s)
		}
		n = n*10 + int64(r-'0')
	}
	return n, nil
}

// formatDuration writes whole-millisecond durations in parseDuration's
// syntax; anything else (only in invalid controls) falls back to
// time.Duration's own format, which ParseControl rejects.
func formatDuration(d time.Duration) string {
	switch d {
	case math.MaxInt64:
		return "over 292 years" // where a longer one saturates
	case math.MinInt64:
		return "under -292 years"
	}
	if d < 0 || d%time.Millisecond != 0 {
		return d.String()
	}
	ms := int64(d / time.Millisecond)
	if ms == 0 {
		return "0s"
	}
	var b strings.Builder
	for _, u := range durationUnits {
		if q := ms / u.ms; q > 0 {
			b.WriteString(strconv.FormatInt(q, 10))
			b.WriteString(u.name)
			ms -= q * u.ms
		}
	}
	return b.String()
}

// controlJSON is the stored form of a Control: milliseconds, like the rest
// of the State, rather than time.Duration's nanoseconds.
type controlJSON struct {
	Kind        Kind  `json:"kind"`
	MainMs      int64 `json:"main_ms,omitempty"`
	Periods     int   `json:"periods,omitempty"`
	PeriodMs    int64 `json:"period_ms,omitempty"`
	IncrementMs int64 `json:"increment_ms,omitempty"`
}

// MarshalJSON stores durations as milliseconds (sub-millisecond parts,
// which Validate rejects, are dropped).
func (c Control) MarshalJSON() ([]byte, error) {
	return json.Marshal(controlJSON{
		Kind:        c.Kind,
		MainMs:      c.MainTime.Milliseconds(),
		Periods:     c.Periods,
		PeriodMs:    c.PeriodTime.Milliseconds(),
		IncrementMs: c.Increment.Milliseconds(),
	})
}

// UnmarshalJSON is the inverse of MarshalJSON. It does not validate the
// control (see [State.Validate]) but refuses values that would overflow a
// time.Duration.
func (c *Control) UnmarshalJSON(b []byte) error {
	var j controlJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	main, err1 := durationFromMs("main_ms", j.MainMs)
	period, err2 := durationFromMs("period_ms", j.PeriodMs)
	inc, err3 := durationFromMs("increment_ms", j.IncrementMs)
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	*c = Control{Kind: j.Kind, MainTime: main, Periods: j.Periods, PeriodTime: period, Increment: inc}
	return nil
}

// maxDurationMs is the largest millisecond count a time.Duration holds.
const maxDurationMs = int64(1<<63-1) / int64(time.Millisecond)

func durationFromMs(field string, ms int64) (time.Duration, error) {
	if ms > maxDurationMs || ms < -maxDurationMs {
		return 0, fmt.Errorf("clock: %s %d out of range", field, ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
