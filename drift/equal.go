package drift

import (
	"bytes"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// sameValue reports whether two JSON texts are proven to hold the same
// value: members in any order, numbers by value (1, 1.0 and 1e0 are one
// number), insignificant whitespace ignored. It is the fast path for
// schemas that are equal but not spelled alike (a registry that re-encodes
// an MCP server's schema with its members sorted), and works on the bytes
// without building a tree.
//
// false means "not proven": the texts differ, or one is not strictly valid
// JSON, or a member name or string differs only by its escapes, or a
// member name repeats, or nesting is deeper than 512. The caller then
// parses both and compares them properly.
func sameValue(a, b []byte) bool {
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	var ok bool
	s.a, ok = flatten(s.a[:0], a)
	if !ok {
		return false
	}
	s.b, ok = flatten(s.b[:0], b)
	if !ok || len(s.a) != len(s.b) {
		return false
	}
	s.ta, s.tb = a, b
	return s.equal(0, 0)
}

// jnode is one JSON value of a flattened text, in document order.
type jnode struct {
	kind  byte  // '{', '[', '"', '0' (number), 't', 'f', 'n'
	start int32 // strings: after the opening quote; numbers: the literal
	end   int32
	next  int32 // index of the node after this value and everything in it
	count int32 // objects: members; arrays: elements
}

// member is an object member during comparison: its name and the index of
// its value.
type member struct {
	name  []byte
	value int32
}

type scratch struct {
	a, b   []jnode
	ta, tb []byte
	ma, mb []member // stacks of members of the objects being compared
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

const maxFlatDepth = 512

// flatten appends the nodes of text to nodes; ok is false unless text is
// one strictly valid JSON value (RFC 8259; UTF-8 checked in strings).
func flatten(nodes []jnode, text []byte) ([]jnode, bool) {
	if len(text) > 1<<30 {
		return nodes, false
	}
	f := flattener{text: text, nodes: nodes}
	f.space()
	if !f.value(0) {
		return f.nodes, false
	}
	f.space()
	return f.nodes, f.pos == len(text)
}

type flattener struct {
	text  []byte
	pos   int
	nodes []jnode
}

func (f *flattener) space() {
	for f.pos < len(f.text) && isSpace(f.text[f.pos]) {
		f.pos++
	}
}

func (f *flattener) value(depth int) bool {
	if f.pos >= len(f.text) || depth > maxFlatDepth {
		return false
	}
	i := len(f.nodes)
	f.nodes = append(f.nodes, jnode{})
	n := jnode{start: int32(f.pos)}
	switch c := f.text[f.pos]; c {
	case '{', '[':
		n.kind = c
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		f.pos++
		f.space()
		if f.pos < len(f.text) && f.text[f.pos] == closer {
			f.pos++
			break
		}
		for {
			if c == '{' {
				if f.pos >= len(f.text) || f.text[f.pos] != '"' || !f.value(depth+1) {
					return false
				}
				f.space()
				if f.pos >= len(f.text) || f.text[f.pos] != ':' {
					return false
				}
				f.pos++
				f.space()
			}
			if !f.value(depth + 1) {
				return false
			}
			n.count++
			f.space()
			if f.pos >= len(f.text) {
				return false
			}
			if f.text[f.pos] == closer {
				f.pos++
				break
			}
			if f.text[f.pos] != ',' {
				return false
			}
			f.pos++
			f.space()
		}
	case '"':
		n.kind = '"'
		f.pos++
		n.start = int32(f.pos)
		ascii := true
		for {
			if f.pos >= len(f.text) {
				return false
			}
			c := f.text[f.pos]
			if c == '"' {
				break
			}
			if c < 0x20 {
				return false
			}
			if c >= 0x80 {
				ascii = false
			}
			if c == '\\' {
				f.pos++
				if f.pos >= len(f.text) {
					return false
				}
				switch f.text[f.pos] {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				case 'u':
					r, ok := hex4(f.text, f.pos+1)
					if !ok {
						return false
					}
					f.pos += 4
					switch {
					case r >= 0xDC00 && r <= 0xDFFF:
						return false // a lone low surrogate
					case r >= 0xD800 && r <= 0xDBFF:
						// A high surrogate must be followed by a low one.
						if f.pos+2 >= len(f.text) || f.text[f.pos+1] != '\\' || f.text[f.pos+2] != 'u' {
							return false
						}
						lo, ok := hex4(f.text, f.pos+3)
						if !ok || lo < 0xDC00 || lo > 0xDFFF {
							return false
						}
						f.pos += 6
					}
				default:
					return false
				}
			}
			f.pos++
		}
		n.end = int32(f.pos)
		f.pos++
		if !ascii && !utf8.Valid(f.text[n.start:n.end]) {
			return false
		}
	case 't', 'f', 'n':
		lit := "null"
		if c == 't' {
			lit = "true"
		} else if c == 'f' {
			lit = "false"
		}
		if !bytes.HasPrefix(f.text[f.pos:], []byte(lit)) {
			return false
		}
		n.kind = c
		f.pos += len(lit)
	default:
		n.kind = '0'
		if !f.number() {
			return false
		}
	}
	if n.kind != '"' {
		n.end = int32(f.pos)
	}
	n.next = int32(len(f.nodes))
	f.nodes[i] = n
	return true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (f *flattener) number() bool {
	t := f.text
	digits := func() bool {
		start := f.pos
		for f.pos < len(t) && t[f.pos] >= '0' && t[f.pos] <= '9' {
			f.pos++
		}
		return f.pos > start
	}
	if f.pos < len(t) && t[f.pos] == '-' {
		f.pos++
	}
	switch {
	case f.pos < len(t) && t[f.pos] == '0':
		f.pos++
	case !digits():
		return false
	}
	if f.pos < len(t) && t[f.pos] == '.' {
		f.pos++
		if !digits() {
			return false
		}
	}
	if f.pos < len(t) && (t[f.pos] == 'e' || t[f.pos] == 'E') {
		f.pos++
		if f.pos < len(t) && (t[f.pos] == '+' || t[f.pos] == '-') {
			f.pos++
		}
		if !digits() {
			return false
		}
	}
	return true
}

// hex4 reads the four hex digits of a \u escape at text[at:].
func hex4(text []byte, at int) (rune, bool) {
	if at+4 > len(text) {
		return 0, false
	}
	var r rune
	for _, c := range text[at : at+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

func (s *scratch) raw(text []byte, n jnode) []byte { return text[n.start:n.end] }

// equal reports whether node i of a and node j of b are proven equal.
func (s *scratch) equal(i, j int32) bool {
	na, nb := s.a[i], s.b[j]
	if na.kind != nb.kind || na.count != nb.count || na.next-i != nb.next-j {
		return false
	}
	switch na.kind {
	case '"':
		// Strings with the same bytes are equal; with different bytes they
		// may still be equal through escapes, which is left unproven.
		return bytes.Equal(s.raw(s.ta, na), s.raw(s.tb, nb))
	case '0':
		// By value, as the parser reads them (out of range is its to
		// reject). The same literal without an exponent, shorter than 300
		// bytes, is in range without parsing.
		ra, rb := s.raw(s.ta, na), s.raw(s.tb, nb)
		if len(ra) < 300 && bytes.Equal(ra, rb) && bytes.IndexAny(ra, "eE") < 0 {
			return true
		}
		x, errx := strconv.ParseFloat(string(ra), 64)
		y, erry := strconv.ParseFloat(string(rb), 64)
		return errx == nil && erry == nil && x == y
	case '[':
		ci, cj := i+1, j+1
		for range na.count {
			if !s.equal(ci, cj) {
				return false
			}
			ci, cj = s.a[ci].next, s.b[cj].next
		}
		return true
	case '{':
		return s.equalObjects(i, j, na.count)
	}
	return true // true, false, null
}

// equalObjects compares two objects of n members each, whatever their
// order: both member lists are sorted by name and compared in step.
func (s *scratch) equalObjects(i, j, n int32) bool {
	baseA, baseB := len(s.ma), len(s.mb)
	defer func() { s.ma, s.mb = s.ma[:baseA], s.mb[:baseB] }()
	ci, cj := i+1, j+1
	for range n {
		ka, kb := s.a[ci], s.b[cj]
		s.ma = append(s.ma, member{s.raw(s.ta, ka), ci + 1})
		s.mb = append(s.mb, member{s.raw(s.tb, kb), cj + 1})
		ci, cj = s.a[ci+1].next, s.b[cj+1].next
	}
	ma, mb := s.ma[baseA:], s.mb[baseB:]
	byName := func(x, y member) int { return bytes.Compare(x.name, y.name) }
	if !slices.IsSortedFunc(ma, byName) {
		slices.SortFunc(ma, byName)
	}
	if !slices.IsSortedFunc(mb, byName) {
		slices.SortFunc(mb, byName)
	}
	for k := range ma {
		if !bytes.Equal(ma[k].name, mb[k].name) || bytes.IndexByte(ma[k].name, '\\') >= 0 {
			return false // different names, or names with escapes: unproven
		}
		if k > 0 && bytes.Equal(ma[k].name, ma[k-1].name) {
			return false // a repeated name: the parser's to reject
		}
	}
	for k := range ma {
		if !s.equal(ma[k].value, mb[k].value) {
			return false
		}
	}
	return true
}
