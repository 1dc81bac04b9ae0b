// Package redact replaces secret values in text, in the shapes and
// escapes a value takes in output (see [New]). It is the redactor of
// [github.com/openplaybook/openplaybook/harness.Redactor] and of the HTTP
// connectors' issued tokens.
package redact

import (
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strings"
)

// Redacted is what [New]'s function writes in place of a secret value.
const Redacted = "[redacted]"

// MinLen is the shortest value [New]'s function replaces, in bytes.
// Shorter values ("1", "yes", "abc") occur in ordinary text so often that
// replacing them would garble every output while protecting nothing a
// guess could not find; a secret that short is not a secret. A preflight
// may warn about such values; the redactor leaves them alone.
//
// The same measure applies to the encoded forms it looks for: a form
// is looked for only when it alone pins down at least MinLen bytes of
// the value (for base64, at least 6 characters, 36 bits, of the value's
// own bits), so that a short value does not blank out every short run of
// base64 or hex digits.
const MinLen = 4

// minBase64Form is the fewest base64 characters a form may have: they must
// carry at least 8*MinLen bits of the value.
const minBase64Form = (8*MinLen + 5) / 6

// New returns a function that replaces every occurrence of each of
// values in a text with [Redacted]. Values shorter than [MinLen]
// bytes are ignored. The function is safe for concurrent use.
//
// A value is looked for in three shapes, anywhere in the text: as is
// (byte for byte), as its hex encoding (each digit a-f in either case,
// mixed freely), and as its base64 encoding (the standard or the URL
// alphabet, padded or unpadded), also inside a longer base64 text (an
// HTTP Basic credential, a JWT, a base64 blob): base64 encodes three
// bytes in four characters, so the value encodes differently at each of
// the three offsets it can start at in the encoded data. For each offset
// the characters that depend on the value alone are looked for, and
// replaced with what surrounds them up to the characters shared with the
// neighbouring bytes.
//
// Each byte of a shape may be written in the text in any of these ways,
// chosen byte by byte (so a half-escaped value, or one escaped by a
// library that spares other characters, is found as well):
//
//   - literally;
//   - percent-encoded, %XX with either case of each hex digit (RFC 3986
//     section 2.1: encodeURIComponent, url.PathEscape, urllib.parse.quote
//     all write this form, each sparing a different set of characters);
//   - a space as '+' (url.QueryEscape, HTML forms);
//   - JSON-escaped (RFC 8259 section 7): \" \\ \/ \b \f \n \r \t, or
//     \uXXXX with either case of hex digit for the character the byte
//     belongs to (a surrogate pair for one outside the BMP), as JSON
//     encoders write with HTML or ASCII-only escaping; also such an
//     escape escaped once or twice over (its backslash written as 2 or 4
//     backslashes: \\u0026, \\\"), as where a JSON text is a string
//     inside another JSON text (an MCP tool's text content in a JSON-RPC
//     message or a stored result).
//
// A match may run across line breaks (LF, CR LF or CR, with the blanks
// that indent the next line), one at a time at any point, as when base64
// or a long token is wrapped at a fixed width or a log line is folded;
// the line breaks inside a match are kept after the [Redacted] that
// replaces it, so that the text keeps its lines. A blank line (two breaks
// in a row) ends a match. Where matches overlap (two values that share
// text, or two shapes of one value), everything any of them covers is
// replaced, once.
//
// Cost: the text is read once, with a bit-parallel automaton (shift-and,
// one bit per byte of each shape) that advances only the shapes a match
// is under way in; each match found is then read back once to find where
// it starts. No backtracking: the time is linear in the length of the
// text, times at most the total length of the shapes.
//
// What is not caught: in a longer base64 text, the one or two characters
// at each end of the value's encoding that it shares with the
// neighbouring bytes (at most 4 bits of the value at each end stay);
// base64 forms of a value shorter than MinLen+1 bytes at the offsets
// other than 0 (too few characters depend on the value alone); percent
// escapes nested in escapes (%2541 for %41); and any other transformation
// (base32, a hash, compression, encryption, truncation, a value split into
// separate writes). Redaction is a safety net, not a guarantee.
func New(values []string) func(string) string {
	m := newMatcher(redactShapes(values))
	if m == nil {
		return func(s string) string { return s }
	}
	return m.redact
}

// A shape is one way a value is looked for: per position, the set of
// bytes that may stand there.
type shape []byteSet

// byteSet is a set of bytes, bit c%64 of word c/64 for byte c.
type byteSet [4]uint64

// literalShape is the shape of s byte for byte.
func literalShape(s string) shape {
	sh := make(shape, len(s))
	for i := 0; i < len(s); i++ {
		sh[i].add(s[i])
	}
	return sh
}

// add puts byte c in the set.
func (e *byteSet) add(c byte) { e[c>>6] |= 1 << (c & 63) }

// redactShapes returns the distinct shapes of values that [New] looks
// for, longest first.
func redactShapes(values []string) []shape {
	seen := map[string]bool{}
	var shapes []shape
	add := func(key string, sh shape) {
		if len(sh) >= MinLen && !seen[key] {
			seen[key] = true
			shapes = append(shapes, sh)
		}
	}
	for _, v := range values {
		if len(v) < MinLen {
			continue
		}
		add("raw\x00"+v, literalShape(v))
		h := hex.EncodeToString([]byte(v))
		hs := literalShape(h)
		for i := 0; i < len(h); i++ {
			hs[i].add(strings.ToUpper(h[i : i+1])[0])
		}
		add("hex\x00"+h, hs)
		// One shape for both alphabets: the two differ only in the
		// characters for 62 and 63.
		both := func(std, url string) shape {
			sh := literalShape(std)
			for i := 0; i < len(url); i++ {
				sh[i].add(url[i])
			}
			return sh
		}
		std, url := base64.StdEncoding, base64.URLEncoding
		add("b64\x00"+std.EncodeToString([]byte(v)), both(std.EncodeToString([]byte(v)), url.EncodeToString([]byte(v))))
		rs, ru := std.WithPadding(base64.NoPadding), url.WithPadding(base64.NoPadding)
		add("b64\x00"+rs.EncodeToString([]byte(v)), both(rs.EncodeToString([]byte(v)), ru.EncodeToString([]byte(v))))
		for k := range 3 {
			if f := base64Middle(std, v, k); len(f) >= minBase64Form {
				add("b64\x00"+f, both(f, base64Middle(url, v, k)))
			}
		}
	}
	slices.SortStableFunc(shapes, func(a, b shape) int { return len(b) - len(a) })
	return shapes
}

// base64Middle returns the characters of the base64 encoding of v, k bytes
// (0, 1 or 2) after the start of a group of three, that depend on v's bits
// alone: the same whatever bytes come before and after v.
func base64Middle(e *base64.Encoding, v string, k int) string {
	full := e.WithPadding(base64.NoPadding).EncodeToString(append(make([]byte, k), v...))
	from := (8*k + 5) / 6
	to := 8 * (k + len(v)) / 6
	if to <= from {
		return ""
	}
	return full[from:to]
}
