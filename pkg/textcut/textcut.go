// Package textcut shortens text to a number of bytes without splitting a
// character: names held to a stored size, and a client's text quoted back
// in a message.
package textcut

import "unicode/utf8"

// Prefix is s cut to at most n bytes, at a character boundary.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// Quote is Prefix with mark added when s was cut, for quoting a client's
// text: an answer need not carry back kilobytes sent in its place.
func Quote(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	return Prefix(s, n) + mark
}
