package clock

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestDefault(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	if got, want := c.String(), "5m+3x30s"; got != want {
		t.Errorf("Default().String() = %q, want %q", got, want)
	}
}

func TestControlString(t *testing.T) {
	tests := []struct {
		name string
		c    Control
		want string
	}{
		{"none", Control{}, "none"},
		{"default byo-yomi", Default(), "5m+3x30s"},
		{"byo-yomi without main time", Control{Kind: ByoYomi, Periods: 5, PeriodTime: 10 * time.Second}, "0s+5x10s"},
		{"byo-yomi compound durations", Control{Kind: ByoYomi, MainTime: 90 * time.Minute, Periods: 1, PeriodTime: 90 * time.Second}, "1h30m+1x1m30s"},
		{"fischer", Control{Kind: Fischer, MainTime: 3 * time.Minute, Increment: 2 * time.Second}, "3m+2s"},
		{"sudden death", Control{Kind: Fischer, MainTime: 10 * time.Minute}, "10m+0s"},
		{"milliseconds", Control{Kind: Fischer, MainTime: 1500 * time.Millisecond, Increment: 250 * time.Millisecond}, "1s500ms+250ms"},
		{"all units", Control{Kind: Fischer, MainTime: time.Hour + time.Minute + time.Second + time.Millisecond}, "1h1m1s1ms+0s"},
		{"invalid sub-millisecond stays printable", Control{Kind: Fischer, MainTime: 1500 * time.Microsecond}, "1.5ms+0s"},
		{"unknown kind", Control{Kind: 9}, "kind(9)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseControl(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Control
		wantErr string // substring; "" means success
	}{
		{"none", "none", Control{}, ""},
		{"none upper case with spaces", "  NONE ", Control{}, ""},
		{"default", "5m+3x30s", Default(), ""},
		{"pure byo-yomi shorthand", "3x30s", Control{Kind: ByoYomi, Periods: 3, PeriodTime: 30 * time.Second}, ""},
		{"pure byo-yomi canonical", "0s+3x30s", Control{Kind: ByoYomi, Periods: 3, PeriodTime: 30 * time.Second}, ""},
		{"bare zero main", "0+3x30s", Control{Kind: ByoYomi, Periods: 3, PeriodTime: 30 * time.Second}, ""},
		{"fischer", "3m+2s", Control{Kind: Fischer, MainTime: 3 * time.Minute, Increment: 2 * time.Second}, ""},
		{"sudden death shorthand", "10m", Control{Kind: Fischer, MainTime: 10 * time.Minute}, ""},
		{"non-canonical seconds", "90s+0s", Control{Kind: Fischer, MainTime: 90 * time.Second}, ""},
		{"compound", "1h30m+1x1m30s", Control{Kind: ByoYomi, MainTime: 90 * time.Minute, Periods: 1, PeriodTime: 90 * time.Second}, ""},
		{"milliseconds", "1s500ms+250ms", Control{Kind: Fischer, MainTime: 1500 * time.Millisecond, Increment: 250 * time.Millisecond}, ""},
		{"empty", "", Control{}, "empty duration"},
		{"missing unit", "5+3x30s", Control{}, "expected a unit"},
		{"units out of order", "30s5m+0s", Control{}, "expected a unit"},
		{"repeated unit", "5m5m+0s", Control{}, "expected a unit"},
		{"fraction", "1.5m+0s", Control{}, "expected a unit"},
		{"negative", "-5m+0s", Control{}, "expected a number"},
		{"empty main", "+3x30s", Control{}, "empty duration"},
		{"two pluses", "5m+3x30s+1s", Control{}, "expected a number"},
		{"missing periods", "5m+x30s", Control{}, "expected a number"},
		{"zero periods", "5m+0x30s", Control{}, "1 to 100 periods"},
		{"too many periods", "5m+101x30s", Control{}, "1 to 100 periods"},
		{"period too short", "5m+3x500ms", Control{}, "outside 1s..1h"},
		{"main too long", "25h+3x30s", Control{}, "exceeds 24h"},
		{"fischer without main", "0s+5s", Control{}, "below 1s"},
		{"huge number", "9999999999h+0s", Control{}, "too long"},
		{"garbage", "blitz", Control{}, "expected a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseControl(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalidControl) {
					t.Fatalf("ParseControl(%q) = %v, %v; want an ErrInvalidControl containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseControl(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
		})
	}
}

// joined returns the individual errors of an errors.Join result.
func joined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

func TestControlValidate(t *testing.T) {
	tests := []struct {
		name     string
		c        Control
		wantErrs []string // one substring per expected problem
	}{
		{"none", Control{}, nil},
		{"default", Default(), nil},
		{"byo-yomi at the bounds", Control{Kind: ByoYomi, MainTime: MaxMainTime, Periods: MaxPeriods, PeriodTime: MaxPeriodTime}, nil},
		{"byo-yomi minimal", Control{Kind: ByoYomi, Periods: 1, PeriodTime: MinPeriodTime}, nil},
		{"fischer at the bounds", Control{Kind: Fischer, MainTime: MinFischerMain, Increment: MaxIncrement}, nil},
		{"none with values", Control{Kind: None, MainTime: time.Second, Periods: 1, Increment: time.Second},
			[]string{"no-clock control has a main time", "no-clock control has byo-yomi periods", "no-clock control has an increment"}},
		{"byo-yomi everything wrong", Control{Kind: ByoYomi, MainTime: 25 * time.Hour, Periods: 0, PeriodTime: time.Second / 2, Increment: time.Second},
			[]string{"exceeds 24h", "1 to 100 periods", "outside 1s..1h", "has an increment"}},
		{"negatives", Control{Kind: Fischer, MainTime: -time.Second, Periods: -1, PeriodTime: -time.Second, Increment: -time.Second},
			[]string{"main time -1s is negative", "period time -1s is negative", "increment -1s is negative", "periods -1 is negative", "Fischer control has byo-yomi periods"}},
		{"sub-millisecond", Control{Kind: Fischer, MainTime: time.Second + time.Microsecond, Increment: time.Nanosecond},
			[]string{"main time 1.000001s is not a whole", "increment 1ns is not a whole"}},
		{"fischer increment too large", Control{Kind: Fischer, MainTime: time.Minute, Increment: MaxIncrement + time.Millisecond},
			[]string{"increment 1h1ms exceeds 1h"}},
		{"too many periods", Control{Kind: ByoYomi, Periods: MaxPeriods + 1, PeriodTime: time.Second}, []string{"1 to 100 periods, got 101"}},
		{"unknown kind", Control{Kind: 3}, []string{"unknown kind 3"}},
		// What a protobuf Duration of far more than time.Duration holds
		// becomes: reported as too long, not as a fraction of a millisecond.
		{"saturated", Control{Kind: Fischer, MainTime: math.MaxInt64, Increment: math.MaxInt64},
			[]string{"main time over 292 years exceeds 24h", "increment over 292 years exceeds 1h"}},
		// And of far less: told as the client sent it, not as the figure
		// it was cut to, and a negative period once.
		{"saturated negatives", Control{Kind: ByoYomi, MainTime: math.MinInt64, Periods: 3, PeriodTime: math.MinInt64},
			[]string{"main time under -292 years is negative", "period time under -292 years is negative"}},
		{"negative byo-yomi period", Control{Kind: ByoYomi, Periods: 3, PeriodTime: -time.Second}, []string{"period time -1s is negative"}},
		{"long with a fraction", Control{Kind: Fischer, MainTime: 30*time.Hour + time.Nanosecond, Increment: time.Second}, []string{"main time 30h0m0.000000001s exceeds 24h"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			errs := joined(err)
			if len(errs) != len(tt.wantErrs) {
				t.Fatalf("Validate() = %v; want %d problems", err, len(tt.wantErrs))
			}
			for _, e := range errs {
				if !errors.Is(e, ErrInvalidControl) {
					t.Errorf("%v does not wrap ErrInvalidControl", e)
				}
			}
			for _, want := range tt.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate() = %v; missing %q", err, want)
				}
			}
			// Its text becomes a status message: one line.
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("Validate() = %q; want it on one line", err)
			}
		})
	}
}

func TestControlJSON(t *testing.T) {
	tests := []struct {
		name     string
		c        Control
		wantJSON string
	}{
		{"none", Control{}, `{"kind":"none"}`},
		{"default", Default(), `{"kind":"byoyomi","main_ms":300000,"periods":3,"period_ms":30000}`},
		{"fischer", Control{Kind: Fischer, MainTime: 3 * time.Minute, Increment: 2 * time.Second}, `{"kind":"fischer","main_ms":180000,"increment_ms":2000}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.c)
			if err != nil || string(b) != tt.wantJSON {
				t.Fatalf("Marshal = %s, %v; want %s", b, err, tt.wantJSON)
			}
			var back Control
			if err := json.Unmarshal(b, &back); err != nil || back != tt.c {
				t.Fatalf("Unmarshal(%s) = %+v, %v; want %+v", b, back, err, tt.c)
			}
		})
	}
	for _, bad := range []string{`{"kind":"blitz"}`, `{"kind":"fischer","main_ms":9223372036854775807}`, `{"kind":1}`} {
		var c Control
		if err := json.Unmarshal([]byte(bad), &c); err == nil {
			t.Errorf("Unmarshal(%s) = %+v, want an error", bad, c)
		}
	}
	if _, err := json.Marshal(Control{Kind: 7}); err == nil {
		t.Error("Marshal of an unknown kind succeeded")
	}
}

func FuzzParseControl(f *testing.F) {
	for _, s := range []string{"none", "5m+3x30s", "3m+2s", "3x30s", "10m", "1h1m1s1ms+0s", "0+1x1s", "5m+101x30s", "1.5s", "-1s", "9999999999h", "mmm+x", "1h+2x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseControl(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidControl) {
				t.Fatalf("ParseControl(%q) error %v does not wrap ErrInvalidControl", s, err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseControl(%q) = %+v, which is invalid: %v", s, c, err)
		}
		canon := c.String()
		back, err := ParseControl(canon)
		if err != nil || back != c {
			t.Fatalf("ParseControl(%q) = %+v; its String %q parses as %+v, %v", s, c, canon, back, err)
		}
		if back.String() != canon {
			t.Fatalf("String not canonical: %q then %q", canon, back.String())
		}
	})
}

// TestSeveralProblemsReadOnOneLine: every problem of a control is told,
// after one "invalid time control:".
func TestSeveralProblemsReadOnOneLine(t *testing.T) {
	err := Control{Kind: ByoYomi}.Validate()
	want := "invalid time control: byo-yomi needs 1 to 100 periods, got 0; byo-yomi period 0s is outside 1s..1h"
	if err == nil || err.Error() != want || !errors.Is(err, ErrInvalidControl) {
		t.Fatalf("Validate() = %v, want %q", err, want)
	}
}
