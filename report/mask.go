package report

import (
	"bytes"
	"slices"
	"sort"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/openplaybook/openplaybook/internal/credential"
)

// span is the bytes [start, end) of a file.
type span struct{ start, end int }

// masks returns the credentials of file that overlap its bytes [from,
// to), sorted and apart (see [credentialSpans]); they are found once per
// file, on first use.
func (s *sources) masks(file string, from, to int) []span {
	spans, ok := s.spans[file]
	if !ok {
		spans = credentialSpans(s.src[file])
		s.spans[file] = spans
	}
	spans = masksFrom(spans, from)
	n := sort.Search(len(spans), func(i int) bool { return spans[i].start >= to })
	return spans[:n]
}

// masksFrom returns the tail of spans (sorted, apart) that starts with the
// first span ending after offset off.
func masksFrom(spans []span, off int) []span {
	return spans[sort.Search(len(spans), func(i int) bool { return spans[i].end > off }):]
}

// credentialSpans returns where src holds credentials, sorted and merged:
// those [credential.Spans] finds in src as written (a PEM block may cover
// several lines), and those it finds in the value of a JSON string once
// its escapes are decoded, where the source writes a credential with
// escapes ("postgres:\/\/app:pw@db", as some encoders write "/", or a
// key with a "\u0035" in it). Its cost is linear in the length of src.
func credentialSpans(src []byte) []span {
	var out []span
	// src as a string without a copy (a document can be hundreds of MB):
	// the string is only read during the call and src is not modified
	// meanwhile (Write is synchronous; the CLI never modifies a source).
	var all string
	if len(src) > 0 {
		all = unsafe.String(&src[0], len(src))
	}
	for _, sp := range credential.Spans(all) {
		out = append(out, span{sp.Start, sp.End})
	}
	// JSON strings: from a '"' to the next '"' not escaped, or to the end
	// of the line (a string never holds a raw line break). Only those with
	// an escape need decoding.
	for i := 0; i < len(src); {
		q := bytes.IndexByte(src[i:], '"')
		if q < 0 {
			break
		}
		start := i + q + 1
		end, escaped := stringEnd(src, start)
		if escaped {
			out = append(out, decodedSpans(src[start:end], start)...)
		}
		i = end + 1
	}
	if len(out) < 2 {
		return out
	}
	slices.SortFunc(out, func(a, b span) int { return a.start - b.start })
	merged := out[:1]
	for _, sp := range out[1:] {
		if last := &merged[len(merged)-1]; sp.start <= last.end {
			last.end = max(last.end, sp.end)
			continue
		}
		merged = append(merged, sp)
	}
	return merged
}

// stringEnd returns where the body of the JSON string that starts at
// offset start of src ends: at the next '"' not escaped, at a line break
// or at the end of src; and whether the body holds a '\\'.
func stringEnd(src []byte, start int) (end int, escaped bool) {
	end = len(src)
	if q := bytes.IndexByte(src[start:], '"'); q >= 0 {
		end = start + q
	}
	body := src[start:end]
	if nl := bytes.IndexByte(body, '\n'); nl >= 0 {
		end, body = start+nl, body[:nl]
	}
	if bytes.IndexByte(body, '\\') < 0 {
		return end, false
	}
	// An escape: the first '"' may be escaped; go byte by byte.
	i := start
	for i < len(src) && src[i] != '"' && src[i] != '\n' {
		if src[i] == '\\' {
			i++
		}
		i++
	}
	return min(i, len(src)), true
}

// decodedSpans returns where the body raw of a JSON string, found at
// offset base of its file, holds credentials once decoded: each one as
// the bytes of raw that encode it, escapes whole.
func decodedSpans(raw []byte, base int) []span {
	var dec []byte
	jsonUnits(raw, func(_, _ int, b []byte) { dec = append(dec, b...) })
	found := credential.Spans(string(dec))
	if len(found) == 0 {
		return nil
	}
	// Map the decoded offsets back to raw ones: a span starts with the
	// unit (a byte or an escape) that writes its first byte, and ends
	// with the unit that writes its last.
	out := make([]span, 0, len(found))
	d, next := 0, 0 // decoded offset of the unit; next span to map
	var cur span
	open := false
	jsonUnits(raw, func(start, end int, b []byte) {
		for next < len(found) {
			f := found[next]
			if !open && f.Start < d+len(b) {
				cur, open = span{base + start, 0}, true
			}
			if !open || f.End > d+len(b) {
				break
			}
			cur.end = base + end
			out = append(out, cur)
			open = false
			next++
		}
		d += len(b)
	})
	return out
}

// jsonUnits calls f for each unit of raw, the body of a JSON string (what
// is between the quotes): an escape (`\n`, `\u00e9`, a surrogate pair
// `\ud83d\ude00`) or a byte not in one, with where it is in raw and the
// bytes it stands for. An escape that is not valid JSON stands for itself,
// byte by byte.
func jsonUnits(raw []byte, f func(start, end int, b []byte)) {
	var buf [utf8.UTFMax]byte
	for i := 0; i < len(raw); {
		if raw[i] != '\\' || i+1 >= len(raw) {
			f(i, i+1, raw[i:i+1])
			i++
			continue
		}
		switch c := raw[i+1]; c {
		case '"', '\\', '/':
			f(i, i+2, raw[i+1:i+2])
			i += 2
			continue
		case 'b', 'f', 'n', 'r', 't':
			buf[0] = simpleEscapes[c]
			f(i, i+2, buf[:1])
			i += 2
			continue
		case 'u':
			if r, ok := hex4(raw[i+2:]); ok {
				n := 6
				if utf16.IsSurrogate(r) {
					r2, ok := rune(0), false
					if len(raw) >= i+12 && raw[i+6] == '\\' && raw[i+7] == 'u' {
						r2, ok = hex4(raw[i+8:])
					}
					if r = utf16.DecodeRune(r, r2); ok && r != utf8.RuneError {
						n = 12
					}
				}
				f(i, i+n, buf[:utf8.EncodeRune(buf[:], r)])
				i += n
				continue
			}
		}
		f(i, i+1, raw[i:i+1])
		i++
	}
}

// simpleEscapes maps the letter of a one-letter escape to its byte.
var simpleEscapes = [256]byte{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// hex4 decodes the four hex digits b starts with.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// withSpan returns masks (sorted, apart) with sp added, still sorted and
// apart; masks itself is not changed.
func withSpan(masks []span, sp span) []span {
	out := make([]span, 0, len(masks)+1)
	for _, m := range masks {
		switch {
		case m.end < sp.start:
			out = append(out, m)
		case m.start > sp.end:
			if sp.end > sp.start {
				out = append(out, sp)
				sp = span{}
			}
			out = append(out, m)
		default:
			sp = span{min(sp.start, m.start), max(sp.end, m.end)}
		}
	}
	if sp.end > sp.start {
		out = append(out, sp)
	}
	return out
}
