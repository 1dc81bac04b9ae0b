// Package textsafe shows untrusted text to a person without letting it
// hide or reorder what they read. It is the one place openplaybook
// decides which characters are escaped in text for people (the status
// command, explain's text, Markdown and HTML renderings); machine output
// (JSON) keeps text as it is.
package textsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Unsafe reports whether r is escaped by [Escape]:
//
//   - C0 controls (U+0000-U+001F) other than tab and newline, DEL
//     (U+007F) and the C1 controls (U+0080-U+009F): a carriage return or
//     an ANSI escape sequence rewrites what a terminal shows;
//   - every format character (Unicode category Cf), which covers the
//     bidirectional controls (U+061C, U+200E, U+200F, U+202A-U+202E,
//     U+2066-U+2069) that reorder the text around them and the invisible
//     characters U+00AD (soft hyphen), U+180E, U+200B-U+200D,
//     U+2060-U+2064, U+FEFF, U+FFF9-U+FFFB and the tag characters
//     U+E0001-U+E007F;
//   - U+2028 and U+2029 (line and paragraph separators, which some
//     displays break lines at and others do not), and the blank fillers
//     U+115F, U+1160, U+3164 and U+FFA0, which show as nothing.
func Unsafe(r rune) bool {
	switch {
	case r == '\t' || r == '\n':
		return false
	case r < 0x20 || r >= 0x7f && r <= 0x9f:
		return true
	case r < 0xa0:
		return false
	case r == 0x2028, r == 0x2029, r == 0x115f, r == 0x1160, r == 0x3164, r == 0xffa0:
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// Escape returns s with every character [Unsafe] reports written as
// \uXXXX (lower-case hex, as in \u202e) and every byte that is not UTF-8
// as \xNN. Tabs and newlines are kept; everything else is unchanged, a
// backslash included. It returns s itself when nothing needs escaping.
func Escape(s string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if Unsafe(r) || (r == utf8.RuneError && n == 1) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case Unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Line is [Escape] for text shown on one line: newlines and tabs are
// escaped too (\n, \t).
func Line(s string) string {
	s = Escape(s)
	if !strings.ContainsAny(s, "\n\t") {
		return s
	}
	return strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(s)
}
