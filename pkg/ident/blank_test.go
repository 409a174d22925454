package ident

import "testing"

// TestIDsWithBlankRunesAreRefused: letters and marks that draw nothing (a
// variation selector, a Hangul filler, the combining grapheme joiner)
// would make "alice" and another id print alike, as a format character
// would.
func TestIDsWithBlankRunesAreRefused(t *testing.T) {
	for _, id := range []string{"alice\ufe0f", "alice\u3164", "alice\u034f", "alice\u115f"} {
		if err := Check("player_id", id, 128, ""); err == nil {
			t.Errorf("Check(%+q) = nil, want it refused like \"alice\\u200b\" (%v)", id, Check("player_id", "alice\u200b", 128, ""))
		}
	}
}
