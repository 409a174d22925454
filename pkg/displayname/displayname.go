// Package displayname checks the names players are shown by, wherever
// they come from (a guest's nickname, a tournament system's seats): text
// that every app can show on one line.
package displayname

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/palacehq/palace/pkg/apierr"
)

// MaxRunes and MaxBytes bound a name: 24 characters of any script, which
// fit in 96 bytes of UTF-8.
const (
	MaxRunes = 24
	MaxBytes = 96
)

// Check reports what is wrong with the name s sent as field, or nil.
// Spaces around it are not counted.
func Check(field, s string) error {
	s = strings.TrimSpace(s)
	switch n := utf8.RuneCountInString(s); {
	case !utf8.ValidString(s):
		return apierr.New(apierr.Invalid, "%s: not valid UTF-8", field)
	case n == 0:
		return apierr.New(apierr.Invalid, "%s: required", field)
	case n > MaxRunes:
		return apierr.New(apierr.Invalid, "%s: %d characters, at most %d allowed", field, n, MaxRunes)
	case len(s) > MaxBytes:
		return apierr.New(apierr.Invalid, "%s: %d bytes in UTF-8, at most %d allowed", field, len(s), MaxBytes)
	}
	prev := rune(0)
	for _, r := range s {
		if !Allowed(r) || strayTag(prev, r) {
			return apierr.New(apierr.Invalid, "%s: contains an unprintable character %U", field, r)
		}
		prev = r
	}
	if strings.IndexFunc(s, shows) < 0 {
		return apierr.New(apierr.Invalid, "%s: nothing in it shows", field)
	}
	return nil
}

// shows reports whether r draws something.
func shows(r rune) bool { return unicode.IsPrint(r) && !Blank(r) }

// Blank reports whether r draws nothing though Unicode counts it as a
// letter, mark or symbol: the Hangul fillers, the blank braille pattern,
// the combining grapheme joiner, the Khmer inherent vowels, the null
// notehead, and the variation selectors. A name of nothing else looks
// empty in any app, and an id with one looks like the id without it.
func Blank(r rune) bool {
	switch r {
	case '\u115f', '\u1160', '\u3164', '\uffa0', '\u2800', '\u034f', '\u17b4', '\u17b5', '\U0001D159':
		return true
	}
	return unicode.Is(unicode.Variation_Selector, r)
}

// Allowed reports whether a name may hold r: a printable character, or
// one of the invisible ones that emoji are written with (the zero-width
// joiner of 👨‍👩‍👧, variation selectors, the tags of subdivision flags).
func Allowed(r rune) bool {
	return unicode.IsPrint(r) || r == '\u200d' || r >= 0xfe00 && r <= 0xfe0f || isTag(r)
}

// blackFlag begins a subdivision flag (🏴 and tags, as in Scotland's); tags
// anywhere else are invisible text.
const blackFlag = '\U0001F3F4'

// cancelTag ends a flag's tags: any after it are stray.
const cancelTag = '\U000E007F'

func isTag(r rune) bool { return r >= 0xe0020 && r <= 0xe007f }

// strayTag reports whether r, after prev, is a tag outside a subdivision
// flag: invisible text.
func strayTag(prev, r rune) bool {
	return isTag(r) && prev != blackFlag && (!isTag(prev) || prev == cancelTag)
}

// Fit makes a name Check takes of s, for a name that was never checked (a
// Google profile's, one signed into a credential before names were
// checked): the characters a name may hold, trimmed, cut to MaxRunes and
// MaxBytes. It is "" when nothing that shows is left.
func Fit(s string) string {
	var b strings.Builder
	n, prev := 0, rune(0)
	for _, r := range strings.TrimSpace(s) {
		if n == MaxRunes || b.Len()+utf8.RuneLen(r) > MaxBytes {
			break
		}
		if !Allowed(r) || r == utf8.RuneError || strayTag(prev, r) {
			continue
		}
		b.WriteRune(r)
		n++
		prev = r
	}
	out := strings.TrimSpace(b.String())
	if strings.IndexFunc(out, shows) < 0 {
		return ""
	}
	return out
}
