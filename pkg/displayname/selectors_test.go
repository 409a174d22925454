package displayname

import (
	"strings"
	"testing"
)

// TestANameOfVariationSelectorsShowsNothing: the variation selectors
// (U+FE00-FE0F, U+E0100-E01EF, Mongolian U+180B-180D/180F), which Allowed
// admits for emoji, draw nothing on their own: a name of them alone is
// refused, as every app would show it empty.
func TestANameOfVariationSelectorsShowsNothing(t *testing.T) {
	for _, name := range []string{"\ufe0f", strings.Repeat("\ufe0f", 24), "\ufe00\ufe0e", "\U000E0100", "\u180b\u180c"} {
		if err := Check("nickname", name); err == nil || !strings.Contains(err.Error(), "nothing in it shows") {
			t.Errorf("Check(%+q) = %v, want %q", name, err, "nickname: nothing in it shows")
		}
		if got := Fit(name); got != "" {
			t.Errorf("Fit(%+q) = %+q, want \"\" (nothing shows)", name, got)
		}
	}
}
