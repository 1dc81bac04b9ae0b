package syntax

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Limits bound what the reader accepts, so that a hostile document costs a
// bounded amount of time and memory. A zero field takes its default.
type Limits struct {
	// MaxSize is the largest document in bytes. Default 16 MiB; at most
	// [MaxSizeLimit] (a larger value is taken as that).
	MaxSize int
	// MaxDepth is the deepest nesting of objects and arrays. Default 128.
	MaxDepth int
	// MaxString is the longest string (or member name) in bytes, after
	// unescaping. Default 1 MiB.
	MaxString int
	// MaxArray is the most elements one array may hold. Default 100,000.
	MaxArray int
}

// Default limits; see [Limits].
const (
	DefaultMaxSize   = 16 << 20
	DefaultMaxDepth  = 128
	DefaultMaxString = 1 << 20
	DefaultMaxArray  = 100_000
)

// MaxSizeLimit is the largest [Limits.MaxSize]: 1 GiB. Offsets within the
// tree are kept in 32 bits.
const MaxSizeLimit = 1 << 30

func (l Limits) withDefaults() Limits {
	if l.MaxSize <= 0 {
		l.MaxSize = DefaultMaxSize
	}
	l.MaxSize = min(l.MaxSize, MaxSizeLimit)
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxString <= 0 {
		l.MaxString = DefaultMaxString
	}
	if l.MaxArray <= 0 {
		l.MaxArray = DefaultMaxArray
	}
	return l
}

// Error is one problem the reader found. Offset is a byte offset into the
// source; Pointer is the JSON Pointer of the value concerned, as far as the
// reader got. Rule is a stable kebab-case id documented in docs/rules.md.
type Error struct {
	Offset  int
	Pointer string
	Rule    string
	Message string
}

// Rule ids of the reader's errors; docs/rules.md documents each.
const (
	RuleSyntax          = "syntax"
	RuleDuplicateMember = "duplicate-member"
	RuleInvalidUTF8     = "invalid-utf8"
	RuleByteOrderMark   = "byte-order-mark"
	RuleComment         = "comment"
	RuleTrailingComma   = "trailing-comma"
	RuleTrailingData    = "trailing-data"
	RuleNonFinite       = "non-finite-number"
	RuleLimit           = "limit"
)

// Parse reads one JSON document from src. It returns the root value (nil
// when not even the first token could be read) and every problem found, in
// source order. Parse never panics on any input and runs in time linear in
// len(src).
//
// A byte order mark, comments, trailing commas and NaN/Infinity are
// reported and then read past (as if blanked out, or as 0), so the rest of
// the document is still checked. Any other syntax error ends the read: the
// tree holds everything before it, and values cut off there are left out.
//
// The tree keeps src: the text of strings without escapes, of numbers and
// of member names is src's own bytes, not a copy (see [Node]). src must
// therefore never be modified after Parse, for as long as the tree or any
// string read from it is in use; pass a copy when the buffer is to be
// reused.
func Parse(src []byte, lim Limits) (*Node, []Error) {
	lim = lim.withDefaults()
	if len(src) > lim.MaxSize {
		return nil, []Error{{Rule: RuleLimit, Message: fmt.Sprintf(
			"document is %d bytes; the limit is %d bytes", len(src), lim.MaxSize)}}
	}
	// Read the text as it is; only when that fails, look for what a
	// lenient reader accepts (comments, trailing commas, ...), report it,
	// and read again past it. Valid documents, the common case, are read
	// once and never pre-scanned.
	p := &parser{lim: lim}
	root := p.parse(src)
	if p.stopped || p.has(RuleTrailingData) {
		q := &parser{lim: lim}
		if fixed := q.repair(src); len(q.errs) > 0 {
			p, root = q, q.parse(fixed)
		}
	}
	for i := range p.errs {
		if e := &p.errs[i]; e.Pointer == "" && root != nil {
			e.Pointer = innermost(root, e.Offset).Pointer()
		}
	}
	sortErrors(p.errs)
	return root, p.errs
}

// parse reads src, which repair may have blanked in places.
func (p *parser) parse(src []byte) *Node {
	p.src = src
	p.t = &tree{src: src}
	p.dec = jsontext.NewDecoder(bytes.NewReader(src),
		jsontext.AllowDuplicateNames(true), // reported by us, with both places
		jsontext.AllowInvalidUTF8(true),    // reported by us, then read on
	)
	v, ok := p.value(0)
	if !ok {
		return nil
	}
	root := new(Node)
	*root = v
	p.t.root = root
	if !p.stopped {
		if off := p.skipSpace(int(p.dec.InputOffset())); off < len(src) {
			p.errorf(off, "", RuleTrailingData, "unexpected data after the end of the document; a file holds exactly one JSON value")
		}
	}
	return root
}

func (p *parser) has(rule string) bool {
	for _, e := range p.errs {
		if e.Rule == rule {
			return true
		}
	}
	return false
}

// Truncated reports whether errs holds an error that ended the read early
// (a syntax error, or a document over the size limit): the tree then lacks
// whatever came after it.
func Truncated(errs []Error) bool {
	for _, e := range errs {
		if e.Rule == RuleSyntax || e.Rule == RuleLimit && e.Pointer == "" && e.Offset == 0 {
			return true
		}
	}
	return false
}

// innermost returns the deepest value of the tree whose text holds off
// (containers still open at a fatal error hold everything after their
// start).
func innermost(n *Node, off int) *Node {
	for {
		var next *Node
		for i := range n.Len() {
			if c := n.Child(i); contains(c, off) {
				next = c
				break
			}
		}
		if next == nil {
			return n
		}
		n = next
	}
}

func contains(n *Node, off int) bool {
	if n.Kind != Object && n.Kind != Array {
		return false
	}
	return off >= int(n.Offset) && (off < int(n.End) || n.End == n.Offset)
}

type parser struct {
	lim      Limits
	dec      *jsontext.Decoder
	errs     []Error
	stopped  bool // a fatal syntax error ended the read
	unq      []byte
	src      []byte
	lineIdx  *Lines
	t        *tree  // the tree being built
	slab     []Node // where blocks of children are carved from
	slabSize int    // the size of the last slab made
	stack    []Node // scratch stack of the children of open containers
	strs     map[string]string
	path     []string // the reference tokens (unescaped) of the value being read
}

// pointer is the JSON Pointer of the value being read.
func (p *parser) pointer() string {
	var b strings.Builder
	for _, t := range p.path {
		b.WriteByte('/')
		b.WriteString(EscapePointerToken(t))
	}
	return b.String()
}

func (p *parser) lines() *Lines {
	if p.lineIdx == nil {
		p.lineIdx = NewLines(p.src)
	}
	return p.lineIdx
}

func (p *parser) errorf(off int, ptr, rule, format string, args ...any) {
	p.errs = append(p.errs, Error{Offset: off, Pointer: ptr, Rule: rule, Message: fmt.Sprintf(format, args...)})
}

// value reads the next value. depth counts the enclosing containers.
// The value's JSON Pointer while it is read is p.pointer(). The value is
// returned by value, its children (if any) in their final block: its
// caller places it, and then points the children's parent at it (adopt).
// ok is false when nothing could be read.
func (p *parser) value(depth int) (n Node, ok bool) {
	if p.stopped {
		return n, false
	}
	n.t = p.t
	switch k := p.dec.PeekKind(); k {
	case '{', '[':
		if depth >= p.lim.MaxDepth {
			off := int(p.dec.InputOffset())
			p.errorf(p.skipSpace(off), p.pointer(), RuleLimit,
				"nesting is deeper than %d levels; the limit is %d", depth, p.lim.MaxDepth)
			if err := p.dec.SkipValue(); err != nil {
				p.syntaxError(err)
				return n, false
			}
			n.Kind = Null
			n.End = int32(p.dec.InputOffset())
			n.Offset = n.End
			return n, true
		}
		if _, err := p.dec.ReadToken(); err != nil {
			p.syntaxError(err)
			return n, false
		}
		n.Offset = int32(p.dec.InputOffset()) - 1
		n.End = n.Offset // until the closing delimiter is read
		n.flags = flagContainer
		if k == '{' {
			n.Kind = Object
			p.object(&n, depth+1)
		} else {
			n.Kind = Array
			p.array(&n, depth+1)
		}
		if p.stopped {
			return n, true
		}
		if _, err := p.dec.ReadToken(); err != nil {
			p.syntaxError(err)
			return n, true
		}
		n.End = int32(p.dec.InputOffset())
		return n, true
	case jsontext.KindInvalid:
		_, err := p.dec.ReadToken()
		p.syntaxError(err)
		return n, false
	}
	raw, err := p.dec.ReadValue()
	if err != nil {
		p.syntaxError(err)
		return n, false
	}
	n.End = int32(p.dec.InputOffset())
	n.Offset = n.End - int32(len(raw))
	switch raw.Kind() {
	case 'n':
		n.Kind = Null
	case 't', 'f':
		n.Kind = Bool // its text is the source's
	case '0':
		n.Kind = Number // its text is the source's
	case '"':
		n.Kind = String
		if s, copied := p.unquote(raw, int(n.Offset)); copied {
			if p.t.texts == nil {
				p.t.texts = map[int32]string{}
			}
			p.t.texts[n.Offset] = s
			n.flags |= flagEscText
		}
	}
	return n, true
}

// close moves the children of n read since base from the scratch stack
// into their own block.
func (p *parser) close(n *Node, base int) {
	k := len(p.stack) - base
	if k > 0 {
		b := p.block(k)
		copy(b, p.stack[base:])
		clear(p.stack[base:])
		n.kids = &b[0]
		if k < bigCount {
			n.count = uint16(k)
		} else {
			n.count = bigCount
			if p.t.counts == nil {
				p.t.counts = map[*Node]int{}
			}
			p.t.counts[n.kids] = k
		}
	}
	p.stack = p.stack[:base]
}

// intern returns b as a string, sharing one copy between equal short
// texts: a document repeats its member names and small values ("type",
// "string", "object") thousands of times.
func (p *parser) intern(b []byte) string {
	if len(b) > maxInterned {
		return string(b)
	}
	if s, ok := p.strs[string(b)]; ok { // no allocation: the compiler reads the map with b's bytes
		return s
	}
	if p.strs == nil {
		p.strs = make(map[string]string, 256)
	}
	s := string(b)
	p.strs[s] = s
	return s
}

// maxInterned is the longest text shared by intern; longer ones are
// rarely repeated.
const maxInterned = 32

func (p *parser) object(n *Node, depth int) {
	base := len(p.stack)
	defer p.close(n, base)
	var seen map[string]int // name -> offset of first occurrence, for large objects
	for !p.stopped && p.dec.PeekKind() != '}' {
		raw, err := p.dec.ReadValue()
		if err != nil {
			p.syntaxError(err)
			return
		}
		nameOff := int(p.dec.InputOffset()) - len(raw)
		name, copied := p.unquote(raw, nameOff)
		first := -1
		if sib := p.stack[base:]; len(sib) < 16 {
			for i := range sib {
				if sib[i].key() == name {
					first = int(sib[i].nameOff)
					break
				}
			}
		} else {
			if seen == nil {
				seen = make(map[string]int, 2*len(sib))
				for i := range sib {
					if _, ok := seen[sib[i].key()]; !ok {
						seen[sib[i].key()] = int(sib[i].nameOff)
					}
				}
			}
			if off, ok := seen[name]; ok {
				first = off
			} else {
				seen[name] = nameOff
			}
		}
		if first >= 0 {
			line, col := p.lines().Position(first)
			p.errorf(nameOff, p.pointer()+"/"+EscapePointerToken(name), RuleDuplicateMember,
				"duplicate member name %q (first at line %d, column %d); each name may appear once in an object", name, line, col)
		}
		p.path = append(p.path, name)
		v, ok := p.value(depth)
		p.path = p.path[:len(p.path)-1]
		if !ok {
			return
		}
		v.flags |= flagMember
		v.nameOff = int32(nameOff)
		if copied {
			if p.t.names == nil {
				p.t.names = map[int32]string{}
			}
			p.t.names[v.nameOff] = name
			v.flags |= flagEscName
		}
		p.stack = append(p.stack, v)
	}
}

func (p *parser) array(n *Node, depth int) {
	base := len(p.stack)
	defer p.close(n, base)
	for i := 0; !p.stopped && p.dec.PeekKind() != ']'; i++ {
		if i == p.lim.MaxArray {
			p.errorf(int(p.dec.InputOffset()), p.pointer(), RuleLimit,
				"array has more than %d elements; the limit is %d", p.lim.MaxArray, p.lim.MaxArray)
			for !p.stopped && p.dec.PeekKind() != ']' {
				if err := p.dec.SkipValue(); err != nil {
					p.syntaxError(err)
				}
			}
			return
		}
		p.path = append(p.path, strconv.Itoa(i))
		v, ok := p.value(depth)
		p.path = p.path[:len(p.path)-1]
		if !ok {
			return
		}
		v.flags |= flagElem
		p.stack = append(p.stack, v)
	}
}

// block returns a block of k nodes carved from a shared slab (capacity
// k): many small containers cost a few large allocations. Slabs grow
// from 64 nodes, doubling up to 2048, so that a small document (one held
// by each of many concurrent runs) does not keep a 2048-node slab alive.
func (p *parser) block(k int) []Node {
	if k > 256 {
		return make([]Node, k)
	}
	if len(p.slab) < k {
		p.slabSize = min(max(2*p.slabSize, 64), 2048)
		p.slab = make([]Node, max(p.slabSize, k))
	}
	b := p.slab[:k:k]
	p.slab = p.slab[k:]
	return b
}
