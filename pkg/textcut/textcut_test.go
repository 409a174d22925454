package textcut

import "testing"

func TestPrefixAndQuote(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"h3e3", 16, "h3e3"},
		{"abcdef", 3, "abc"},
		{"장기왕", 4, "장"}, // 3 bytes a character: never half of one
		{"장기왕", 6, "장기"},
		{"장기", 6, "장기"}, // exactly n bytes: kept whole
		{"장", 2, ""},
		{"abc", -1, ""},
	} {
		if got := Prefix(tt.s, tt.n); got != tt.want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
	if got := Quote("abcdef", 3, "…"); got != "abc…" {
		t.Errorf("Quote cut: %q", got)
	}
	if got := Quote("abc", 3, "…"); got != "abc" {
		t.Errorf("Quote whole: %q", got)
	}
}
