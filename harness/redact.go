package harness

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"sort"
	"strings"
)

// Redacted is what [Redactor] writes in place of a secret value.
const Redacted = "[redacted]"

// MinRedactLen is the shortest value [Redactor] replaces, in bytes.
// Shorter values ("1", "yes", "abc") occur in ordinary text so often that
// replacing them would garble every output while protecting nothing a
// guess could not find; a secret that short is not a secret. A preflight
// may warn about such values; Redactor leaves them alone.
//
// The same measure applies to the encoded forms Redactor looks for: a form
// is looked for only when it alone pins down at least MinRedactLen bytes of
// the value (for base64, at least 6 characters, 36 bits, of the value's
// own bits), so that a short value does not blank out every short run of
// base64 or hex digits.
const MinRedactLen = 4

// minBase64Form is the fewest base64 characters a form may have: they must
// carry at least 8*MinRedactLen bits of the value.
const minBase64Form = (8*MinRedactLen + 5) / 6

// Redactor returns a function that replaces every occurrence of each of
// values in a text with [Redacted]. Values shorter than [MinRedactLen]
// bytes are ignored. The function is safe for concurrent use, and its cost
// is linear in the length of the text whatever the values.
//
// Besides each value as is, it replaces the forms a value commonly takes
// in output, anywhere in the text:
//
//   - its JSON string encoding (without the quotes), with and without
//     HTML escaping (\u003c for <);
//   - its percent encodings: url.QueryEscape and url.PathEscape, and every
//     byte written %XX, each with upper-case and with lower-case hex digits;
//   - its hex encoding, lower case and upper case;
//   - its base64 encoding, in the standard and the URL alphabet, padded and
//     unpadded, also inside a longer base64 text (an HTTP Basic
//     credential, a JWT, a base64 blob): base64 encodes three bytes in four
//     characters, so the value encodes differently at each of the three
//     offsets it can start at in the encoded data. For each offset the
//     characters that depend on the value alone are looked for, and
//     replaced with what surrounds them up to the characters shared with
//     the neighbouring bytes.
//
// A match may run across one line break (LF, CR LF or CR, with the blanks
// that indent the next line) at any point, as when base64 or a long
// token is wrapped at a fixed width or a log line is folded; the line
// breaks inside a match are kept after the [Redacted] that replaces it, so
// that the text keeps its lines. Where matches overlap (two values that
// share text, or two forms of one value), everything any of them covers is
// replaced, once.
//
// What is not caught: hex and percent encodings mixing upper- and
// lower-case digits; in a longer base64 text, the one or two characters at
// each end of the value's encoding that it shares with the neighbouring
// bytes (at most 4 bits of the value at each end stay); base64 forms of a
// value shorter than MinRedactLen+1 bytes at the offsets other than 0 (too
// few characters depend on the value alone); and any other transformation
// (base32, a hash, compression, encryption, truncation, a value split into
// separate writes). Redaction is a safety net, not a guarantee.
func Redactor(values []string) func(string) string {
	m := newMatcher(redactForms(values))
	if m == nil {
		return func(s string) string { return s }
	}
	return m.redact
}

// redactForms returns the distinct forms of values that Redactor looks
// for, longest first.
func redactForms(values []string) []string {
	seen := map[string]bool{}
	var forms []string
	add := func(f string) {
		if len(f) >= MinRedactLen && !seen[f] {
			seen[f] = true
			forms = append(forms, f)
		}
	}
	for _, v := range values {
		if len(v) < MinRedactLen {
			continue
		}
		add(v)
		if b, err := json.Marshal(v); err == nil {
			add(string(b[1 : len(b)-1]))
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if enc.Encode(v) == nil {
			b := bytes.TrimSpace(buf.Bytes())
			add(string(b[1 : len(b)-1]))
		}
		for _, f := range []string{url.QueryEscape(v), url.PathEscape(v), percentAll(v)} {
			add(f)
			add(lowerPercent(f))
		}
		h := hex.EncodeToString([]byte(v))
		add(h)
		add(strings.ToUpper(h))
		for _, e := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			add(e.EncodeToString([]byte(v)))
			add(e.WithPadding(base64.NoPadding).EncodeToString([]byte(v)))
			for k := range 3 {
				if f := base64Middle(e, v, k); len(f) >= minBase64Form {
					add(f)
				}
			}
		}
	}
	slices.SortFunc(forms, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return forms
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

// percentAll writes every byte of v as %XX (upper-case hex).
func percentAll(v string) string {
	const digits = "0123456789ABCDEF"
	b := make([]byte, 0, 3*len(v))
	for i := 0; i < len(v); i++ {
		b = append(b, '%', digits[v[i]>>4], digits[v[i]&15])
	}
	return string(b)
}

// lowerPercent lower-cases the hex digits of the %XX escapes of s.
func lowerPercent(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			for j := i + 1; j <= i+2; j++ {
				if b[j] >= 'A' && b[j] <= 'F' {
					b[j] += 'a' - 'A'
				}
			}
			i += 2
		}
	}
	return string(b)
}

// matcher finds every occurrence of a set of patterns in one pass over a
// text (an Aho-Corasick automaton compiled to a table: one lookup per
// byte of text).
type matcher struct {
	class  [256]uint16 // byte -> column of next
	ncls   int
	next   []int32 // state*ncls + class -> next state's row offset (state*ncls), ^offset where a pattern ends
	out    []int32 // state -> length of the longest pattern ending there, 0 for none
	breaks []uint8 // state -> which of \r \n blank tab have a transition of their own (bits 0-3)
}

// breakBit is the bit of a line-break or blank byte in matcher.breaks.
func breakBit(c byte) uint8 {
	switch c {
	case '\r':
		return 1
	case '\n':
		return 2
	case ' ':
		return 4
	case '\t':
		return 8
	}
	return 0
}

func newMatcher(patterns []string) *matcher {
	if len(patterns) == 0 {
		return nil
	}
	m := &matcher{}
	used := [256]bool{}
	for _, p := range patterns {
		for i := 0; i < len(p); i++ {
			used[p[i]] = true
		}
	}
	m.ncls = 1 // column 0: bytes in no pattern
	for c := range 256 {
		if used[c] {
			m.class[c] = uint16(m.ncls)
			m.ncls++
		}
	}
	total := 1
	for _, p := range patterns {
		total += len(p)
	}
	m.out = make([]int32, 0, total)
	m.next = make([]int32, 0, total*m.ncls)
	newState := func() int32 {
		s := int32(len(m.out))
		m.out = append(m.out, 0)
		for range m.ncls {
			m.next = append(m.next, -1)
		}
		return s
	}
	newState() // the root, 0
	for _, p := range patterns {
		s := int32(0)
		for i := 0; i < len(p); i++ {
			at := int(s)*m.ncls + int(m.class[p[i]])
			if m.next[at] < 0 {
				n := newState()
				m.next[at] = n
			}
			s = m.next[at]
		}
		m.out[s] = int32(len(p))
	}
	m.breaks = make([]uint8, len(m.out))
	for s := range m.out {
		for _, c := range []byte{'\r', '\n', ' ', '\t'} {
			if m.next[s*m.ncls+int(m.class[c])] >= 0 && m.class[c] != 0 {
				m.breaks[s] |= breakBit(c)
			}
		}
	}
	// Breadth first: each state's failure state (the longest proper
	// suffix of its text that is a prefix of a pattern) is known before
	// its children's; missing transitions become those of the failure
	// state.
	fail := make([]int32, len(m.out))
	queue := make([]int32, 0, len(m.out))
	for c := 0; c < m.ncls; c++ {
		if n := m.next[c]; n >= 0 {
			queue = append(queue, n)
		} else {
			m.next[c] = 0
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if m.out[s] == 0 {
			m.out[s] = m.out[fail[s]]
		}
		row := int(s) * m.ncls
		frow := int(fail[s]) * m.ncls
		for c := 0; c < m.ncls; c++ {
			if n := m.next[row+c]; n >= 0 {
				fail[n] = m.next[frow+c]
				queue = append(queue, n)
			} else {
				m.next[row+c] = m.next[frow+c]
			}
		}
	}
	// Make each entry the row offset of its state, bitwise negated when
	// a pattern ends there: one load per byte and a sign test.
	for i, n := range m.next {
		v := n * int32(m.ncls)
		if m.out[n] > 0 {
			v = ^v
		}
		m.next[i] = v
	}
	return m
}

// redact replaces every match in t, and returns t itself when there is
// none.
func (m *matcher) redact(t string) string {
	var (
		row   int32    // the current state's row offset in next
		brk   uint8    // 0: no break; 1: after CR; 2: after LF or a blank that follows it
		skips []int    // positions of the line-break bytes passed over inside a match
		spans [][2]int // merged matches, by start
	)
	for i := 0; i < len(t); i++ {
		c := t[i]
		if row != 0 {
			if bit := breakBit(c); bit != 0 && m.breaks[row/int32(m.ncls)]&bit == 0 {
				skip := false
				switch {
				case c == '\r' && brk == 0:
					skip, brk = true, 1
				case c == '\n' && brk <= 1:
					skip, brk = true, 2
				case (c == ' ' || c == '\t') && brk == 2:
					skip = true
				}
				if skip {
					skips = append(skips, i)
					continue
				}
			}
		}
		brk = 0
		row = m.next[row+int32(m.class[c])]
		if row < 0 {
			row = ^row
			n := int(m.out[row/int32(m.ncls)])
			end := i + 1
			start := matchStart(skips, end, n)
			for len(spans) > 0 && spans[len(spans)-1][1] > start {
				start = min(start, spans[len(spans)-1][0])
				spans = spans[:len(spans)-1]
			}
			spans = append(spans, [2]int{start, end})
		}
	}
	if len(spans) == 0 {
		return t
	}
	var b strings.Builder
	b.Grow(len(t))
	prev := 0
	for _, sp := range spans {
		b.WriteString(t[prev:sp[0]])
		b.WriteString(Redacted)
		for _, r := range t[sp[0]:sp[1]] {
			if r == '\n' || r == '\r' {
				b.WriteRune(r)
			}
		}
		prev = sp[1]
	}
	b.WriteString(t[prev:])
	return b.String()
}

// matchStart returns where a match of n pattern bytes ending at end
// starts, given the sorted positions of the bytes passed over: the
// greatest start such that t[start:end] holds n bytes not passed over.
func matchStart(skips []int, end, n int) int {
	start := end - n
	for {
		k := len(skips) - sort.SearchInts(skips, start)
		// skips beyond end do not exist yet: every skip is before end.
		if s := end - n - k; s != start {
			start = s
			continue
		}
		return start
	}
}
