package displayname

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name, want string
	}{
		{"Kim", ""},
		{"  Kim  ", ""},
		{strings.Repeat("장", 24), ""},
		{"👨‍👩‍👧 family", ""},
		{"🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F", ""},
		{"\u2764\ufe0f Kim", ""}, // an emoji in its picture form
		{"🏴\U000E0067\U000E007F\U000E0067", "f: contains an unprintable character U+E0067"}, // a tag after the flag's end
		{"", "f: required"},
		{"   ", "f: required"},
		{strings.Repeat("장", 25), "f: 25 characters, at most 24 allowed"},
		{"Kim\nLee", "f: contains an unprintable character U+000A"},
		{"a\U000E0067", "f: contains an unprintable character U+E0067"},
		{"\u3164\u3164", "f: nothing in it shows"},
		{"bad \xff", "f: not valid UTF-8"},
	} {
		err := Check("f", c.name)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("Check(%q) = %v, want nil", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("Check(%q) = %v, want %q", c.name, err, c.want)
		}
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{"Kim", "장기", "a\nb", "\u3164", "🏴\U000E0067\U000E007F"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if Check("f", s) == nil {
			trimmed := strings.TrimSpace(s)
			if len(trimmed) > MaxBytes || strings.ContainsAny(trimmed, "\n\r\t\x00") {
				t.Fatalf("Check took %q", s)
			}
		}
	})
}

func TestFit(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Kim", "Kim"},
		{" Kim\nLee ", "KimLee"},
		{strings.Repeat("장", 40), strings.Repeat("장", 24)},
		{"\u3164", ""},
		{"a\U000E0067b", "ab"},
		{"Kim\xffLee", "KimLee"},
		{"Kim \x00", "Kim"},
		{"🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F Kim", "🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F Kim"},
	} {
		if got := Fit(c.in); got != c.want {
			t.Errorf("Fit(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzFit: what Fit makes of any text is empty or a name Check takes.
func FuzzFit(f *testing.F) {
	for _, s := range []string{"Kim", "장기 " + strings.Repeat("장", 30), "a\nb", "\u3164x", "🏴\U000E0067\U000E007F\U000E0067"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := Fit(s); got != "" {
			if err := Check("f", got); err != nil {
				t.Fatalf("Fit(%q) = %q, which Check refuses: %v", s, got, err)
			}
		}
	})
}
