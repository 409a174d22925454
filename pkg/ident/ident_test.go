package ident

import (
	"strings"
	"testing"

	"github.com/palacehq/palace/pkg/apierr"
)

func TestCheck(t *testing.T) {
	for _, ok := range []string{"a", "game-1_x.y:z", "r1700000000-12", "조한", "棋局", strings.Repeat("x", 16)} {
		if err := Check("id", ok, 16, ","); err != nil {
			t.Errorf("Check(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{
		"", strings.Repeat("x", 17), "a b", "a\tb", "a\x00b", "a\x7fb",
		"a\u0085b", // NEL, a C1 control
		"a\u00a0b", // no-break space
		"a\u2028b", // line separator
		"a\u202eb", // right-to-left override
		"a\u200bb", // zero-width space
		"a\ufeffb", // byte order mark
		"a\xffb",   // not UTF-8
		"a{b", "a}b", "a|b", "a,b",
	} {
		err := Check("game_id", bad, 16, ",")
		if apierr.CodeOf(err) != apierr.Invalid || !strings.HasPrefix(err.Error(), "game_id: ") {
			t.Errorf("Check(%q) = %v, want InvalidArgument naming game_id", bad, err)
		}
	}
	if err := Check("id", "a\u202eb", 16, ""); err == nil || !strings.Contains(err.Error(), `id: contains '\u202e' (U+202E) at byte 1;`) {
		t.Errorf("the message of an invisible character: %v; want it named, and where", err)
	}
	if err := Check("id", "a,b", 16, ""); err != nil {
		t.Errorf("a comma refused when not asked: %v", err)
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{"a", "a b", "\u202e", "\xff", "{x}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if Check("id", id, 128, ",") != nil {
			return
		}
		for _, r := range id {
			if r <= ' ' || r == 0x7f || strings.ContainsRune("{}|,", r) {
				t.Fatalf("Check accepted %q, which holds %U", id, r)
			}
		}
	})
}
