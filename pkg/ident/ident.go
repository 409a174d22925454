// Package ident checks the ids that clients choose, or that the services
// issue, and that become parts of Redis keys and of log lines.
package ident

import (
	"strings"
	"unicode"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/displayname"
)

// always are the runes no id may hold: braces would make a Redis Cluster
// hash tag of part of a key, and '|' separates an id from what follows it
// in the services' keys and fields.
const always = "{}|"

// Check refuses, as InvalidArgument naming field, an empty id, one longer
// than limit bytes, and one that holds a space, a control or format
// character or one that draws nothing (Unicode's, not only ASCII's: they
// hide in logs and make two ids that look the same), a brace, '|', or a
// rune of also.
func Check(field, id string, limit int, also string) error {
	switch {
	case id == "":
		return apierr.New(apierr.Invalid, "%s: required", field)
	case len(id) > limit:
		return apierr.New(apierr.Invalid, "%s: longer than %d bytes", field, limit)
	}
	for i, r := range id {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || displayname.Blank(r) || r == unicode.ReplacementChar ||
			strings.ContainsRune(always, r) || strings.ContainsRune(also, r) {
			return apierr.New(apierr.Invalid, "%s: contains %q (%U) at byte %d; an id holds no spaces, control or invisible characters, or any of %q", field, r, r, i, always+also)
		}
	}
	return nil
}
