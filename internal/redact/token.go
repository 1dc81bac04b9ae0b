package redact

import "unicode/utf8"

// A reading is one way to read the text at a position: n characters that
// stand for the bytes b[:nb] of a value (a literal byte, %XX, a JSON
// escape).
type reading struct {
	n, nb int
	b     [4]byte
}

// maxToken is the longest reading: a JSON surrogate pair escaped twice
// over, \\\\uD83D\\\\uDE00.
const maxToken = 18

// maxReadings is the most readings a position has: the byte, and the
// JSON escapes with 1, 2 and 4 backslashes and a nested quote or backslash.
const maxReadings = 5

// tokensAt writes the ways to read t at q into out and returns how many
// there are (at least 1: the byte itself).
func tokensAt(t string, q int, out *[maxReadings]reading) int {
	c := t[q]
	out[0] = reading{n: 1, nb: 1, b: [4]byte{c}}
	n := 1
	switch c {
	case '+':
		out[1] = reading{n: 1, nb: 1, b: [4]byte{' '}}
		n++
	case '%':
		if q+2 < len(t) {
			if hi, lo := unhex(t[q+1]), unhex(t[q+2]); hi >= 0 && lo >= 0 {
				out[1] = reading{n: 3, nb: 1, b: [4]byte{byte(hi<<4 | lo)}}
				n++
			}
		}
	case '\\':
		n += len(jsonEscapes(t, q, out[1:1]))
	}
	return n
}

// jsonEscapes appends to out the readings of the JSON escape at t[q:]
// (RFC 8259 section 7), which starts with a backslash: \" \\ \/ \b \f \n
// \r \t or \uXXXX (either case; a surrogate pair for a character outside
// the BMP). The escape may itself be escaped, as where a JSON text is a
// string inside another JSON text (an MCP tool result's text content):
// its backslash written as 2 or 4 backslashes, \\u0026 for \u0026; \\\"
// and \\\\ are a quote and a backslash so escaped.
func jsonEscapes(t string, q int, out []reading) []reading {
	lead := 0 // the backslashes that may introduce the escape
	for lead < 4 && q+lead < len(t) && t[q+lead] == '\\' {
		lead++
	}
	if lead >= 3 && q+3 < len(t) && (t[q+3] == '"' || t[q+3] == '\\') {
		out = append(out, reading{n: 4, nb: 1, b: [4]byte{t[q+3]}})
	}
	for l := 1; l <= lead; l *= 2 {
		i := q + l
		if i >= len(t) {
			break
		}
		if e := jsonShortEscape[t[i]]; e != 0 {
			if l == 1 || e != '"' && e != '\\' {
				out = append(out, reading{n: l + 1, nb: 1, b: [4]byte{e}})
			}
			continue
		}
		r, ok := hex4(t, i)
		if !ok {
			continue
		}
		size := l + 5
		if r >= 0xD800 && r < 0xDC00 { // a high surrogate: its low one follows
			j := i + 5
			if j+l > len(t) || t[j:j+l] != t[q:q+l] {
				continue
			}
			lo, ok := hex4(t, j+l)
			if !ok || lo < 0xDC00 || lo >= 0xE000 {
				continue
			}
			r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
			size = 2 * (l + 5)
		} else if r >= 0xDC00 && r < 0xE000 {
			continue
		}
		tok := reading{n: size}
		tok.nb = utf8.EncodeRune(tok.b[:], rune(r))
		out = append(out, tok)
	}
	return out
}

// hex4 reads "uXXXX" at t[i:], either case, and returns its value.
func hex4(t string, i int) (int, bool) {
	if i+5 > len(t) || t[i] != 'u' {
		return 0, false
	}
	v := 0
	for _, c := range []byte(t[i+1 : i+5]) {
		d := unhex(c)
		if d < 0 {
			return 0, false
		}
		v = v<<4 | d
	}
	return v, true
}

// unhex returns the value of a hex digit, either case, or -1.
func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// jsonShortEscape maps the character after a backslash in a JSON string
// to the byte it stands for (RFC 8259 section 7); 0 for none.
var jsonShortEscape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}
