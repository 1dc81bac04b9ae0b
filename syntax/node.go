// Package syntax reads JSON text strictly into a tree of [Node] values, each
// carrying its byte offset so that every later check can point at the exact
// token with a line, a byte column and an RFC 6901 JSON Pointer.
//
// The reader accepts RFC 8259 JSON as restricted by RFC 7493 (I-JSON): UTF-8
// only, unique member names. It reports, each as its own [Error] with a rule
// id, what a lenient parser would silently accept or silently reinterpret:
// duplicate member names (compared after unescaping, so "a" and "\u0061"
// collide), invalid UTF-8, a byte order mark, comments, trailing commas,
// trailing data after the document, NaN and Infinity, and documents past the
// [Limits]. After an error it still returns the tree it could build, so one
// run reports as many problems as possible.
//
// Tokenising is done by github.com/go-json-experiment/json/jsontext.
package syntax

import (
	"bytes"
	"encoding/json"
	"iter"
	"sort"
	"strconv"
	"strings"
	"unsafe"
)

// Kind is the JSON type of a [Node].
type Kind uint8

// The JSON types, RFC 8259 section 3.
const (
	Null Kind = iota
	Bool
	Number
	String
	Object
	Array
)

// String returns the JSON name of the kind as used in messages: "null",
// "boolean", "number", "string", "object" or "array".
func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "boolean"
	case Number:
		return "number"
	case String:
		return "string"
	case Object:
		return "object"
	case Array:
		return "array"
	}
	return "invalid"
}

// Node is one JSON value with its place in the source.
//
// A node is a value of a tree built by [Parse] and is used through its
// pointer: the children of an object or array are one contiguous block of
// nodes, and a node's place in the tree is found from its address, so a
// copy of a Node value has no place in it ([Node.Parent] is then nil and
// [Node.Pointer] ""). The zero Node is a null outside any tree.
//
// [Node.Text] is a string's unescaped value, a number's literal text (so no
// precision is lost), or "true"/"false". A member of an object carries its
// own name ([Node.Key], [Node.NameOffset]); [Node.Members] and [Node.Elems]
// iterate over an object's members (in source order, duplicates included)
// and an array's elements; [Node.Len] and [Node.Child] index both.
//
// A node is 32 bytes: its kind, offsets and member name offset, its
// tree, and its first child. Texts are not stored: strings without
// escapes (most member names and values), numbers and booleans are read
// out of the source on each call, sharing its bytes (no copy), which is
// why the source given to [Parse] must never be modified afterwards. The
// few strings with escapes are kept unescaped in a table of the tree.
// [Node.Parent], [Node.Index] and [Node.Pointer] descend from the root
// (a binary search by offset at each level), so they cost O(depth x log
// width); they are meant for messages, not for walking a tree.
type Node struct {
	Kind  Kind
	flags uint8
	count uint16 // number of children of a container, if below bigCount (else t.counts)

	// Offset is the byte offset of the value's first byte; End is the
	// offset just past its last byte. End == Offset for an object or array
	// cut off by a syntax error (its closing delimiter was never read).
	// They are 32-bit, which [MaxSizeLimit] allows, to keep nodes small.
	Offset, End int32

	nameOff int32 // byte offset of the member name's opening quote (flagMember)
	t       *tree
	kids    *Node // a container's first child
}

const (
	flagContainer = 1 << iota // kids is the first of Len() children
	flagMember                // the value of a member of its parent
	flagElem                  // an element of its parent
	flagEscName               // the member name is t.names[nameOff], not the source's bytes
	flagEscText               // the string's value is t.texts[Offset], not the source's bytes
)

// bigCount is the smallest number of children kept in the tree's table
// rather than in the node.
const bigCount = 1<<16 - 1

// tree is what the nodes of one parse share.
type tree struct {
	src    []byte // the text read (a repaired copy when [Parse] repaired it)
	root   *Node
	names  map[int32]string // unescaped member names that are not the source's bytes, by name offset
	texts  map[int32]string // unescaped strings that are not the source's bytes, by offset
	counts map[*Node]int    // the number of children of large containers, by first child
}

// text returns src[from:to] as a string sharing src's bytes, or "" when
// the range is not inside src.
func (t *tree) text(from, to int) string {
	if t == nil || from < 0 || to > len(t.src) || from >= to {
		return ""
	}
	return unsafe.String(&t.src[from], to-from)
}

// kidBlock returns the block of n's children (nil for a scalar).
func (n *Node) kidBlock() []Node {
	if n == nil || n.flags&flagContainer == 0 || n.kids == nil {
		return nil
	}
	k := int(n.count)
	if k == bigCount {
		k = n.t.counts[n.kids]
	}
	return unsafe.Slice(n.kids, k)
}

// Text returns the text of a String, Number or Bool node: a string's
// unescaped value, a number's literal text, "true" or "false"; "" for a
// null, an object or an array.
func (n *Node) Text() string {
	if n == nil {
		return ""
	}
	switch n.Kind {
	case String:
		if n.flags&flagEscText != 0 {
			return n.t.texts[n.Offset]
		}
		return n.t.text(int(n.Offset)+1, int(n.End)-1)
	case Number, Bool:
		return n.t.text(int(n.Offset), int(n.End))
	}
	return ""
}

// Len returns the number of members of an object, or of elements of an
// array (duplicate members included); 0 for any other kind.
func (n *Node) Len() int { return len(n.kidBlock()) }

// Child returns the i-th child of an object (the value of its i-th member,
// whose name is the child's [Node.Key]) or array (its i-th element), in
// source order. It panics unless 0 <= i < n.Len(), like a slice index.
func (n *Node) Child(i int) *Node { return &n.kidBlock()[i] }

// Members iterates over the members of an object in source order,
// duplicates included: each member's name (unescaped) and value. It yields
// nothing for any other kind. The value's [Node.NameOffset] is the
// member's place in the source.
func (n *Node) Members() iter.Seq2[string, *Node] {
	return func(yield func(string, *Node) bool) {
		if n == nil || n.Kind != Object {
			return
		}
		k := n.kidBlock()
		for i := range k {
			if !yield(k[i].key(), &k[i]) {
				return
			}
		}
	}
}

// Elems iterates over the elements of an array in order, each with its
// index. It yields nothing for any other kind.
func (n *Node) Elems() iter.Seq2[int, *Node] {
	return func(yield func(int, *Node) bool) {
		if n == nil || n.Kind != Array {
			return
		}
		k := n.kidBlock()
		for i := range k {
			if !yield(i, &k[i]) {
				return
			}
		}
	}
}

// Bool reports the value of a Bool node (false for any other kind).
func (n *Node) Bool() bool { return n != nil && n.Kind == Bool && n.Text() == "true" }

// Member returns the value of the first member called name, or nil. Names
// are compared byte for byte.
func (n *Node) Member(name string) *Node {
	if n == nil || n.Kind != Object {
		return nil
	}
	k := n.kidBlock()
	for i := range k {
		if k[i].key() == name {
			return &k[i]
		}
	}
	return nil
}

// Key returns the member name under which n sits in its parent object, and
// false when the parent is an array or n is the root.
func (n *Node) Key() (string, bool) {
	if n.flags&flagMember == 0 {
		return "", false
	}
	return n.key(), true
}

// key is [Node.Key] without the flag: the member name, or "".
func (n *Node) key() string {
	switch {
	case n.flags&flagMember == 0:
		return ""
	case n.flags&flagEscName != 0:
		return n.t.names[n.nameOff]
	}
	// A name read as the source's bytes holds no escape and no quote: it
	// ends at the next quote.
	from := int(n.nameOff) + 1
	if n.t == nil || from > len(n.t.src) {
		return ""
	}
	i := bytes.IndexByte(n.t.src[from:], '"')
	if i < 0 {
		return ""
	}
	return n.t.text(from, from+i)
}

// NameOffset returns the byte offset of the opening quote of the name of
// the member whose value n is; for an element or the root, n.Offset.
func (n *Node) NameOffset() int {
	if n.flags&flagMember == 0 {
		return int(n.Offset)
	}
	return int(n.nameOff)
}

// Parent returns the object or array holding n, or nil for the root (and
// for a node that is not in a tree).
func (n *Node) Parent() *Node {
	var parent *Node
	n.descend(func(p, c *Node) {
		if c == n {
			parent = p
		}
	})
	return parent
}

// Index returns n's index among its parent's children (its member's
// position in an object, its position in an array), or -1 for the root
// (and for a node that is not in a tree).
func (n *Node) Index() int {
	i := -1
	n.descend(func(p, c *Node) {
		if c == n {
			i = indexIn(p, c)
		}
	})
	return i
}

// indexIn is the index of c, one of p's children.
func indexIn(p, c *Node) int {
	return int((uintptr(unsafe.Pointer(c)) - uintptr(unsafe.Pointer(p.kids))) / unsafe.Sizeof(Node{}))
}

// descend calls visit for each parent and child on the way from the root
// of n's tree down to n, root first, and reports whether it got to n.
// Children are in source order with increasing offsets, so at each level
// the child holding n is the last one starting at or before n.
func (n *Node) descend(visit func(parent, child *Node)) bool {
	if n == nil || n.t == nil || n.t.root == nil {
		return false
	}
	addr := uintptr(unsafe.Pointer(n))
	size := unsafe.Sizeof(Node{})
	for cur := n.t.root; cur != n; {
		k := cur.kidBlock()
		if len(k) == 0 {
			return false
		}
		base := uintptr(unsafe.Pointer(&k[0]))
		if addr >= base && addr < base+uintptr(len(k))*size {
			if (addr-base)%size != 0 {
				return false
			}
			visit(cur, n)
			return true
		}
		i := sort.Search(len(k), func(i int) bool { return k[i].Offset > n.Offset }) - 1
		if i < 0 {
			return false
		}
		visit(cur, &k[i])
		cur = &k[i]
	}
	return true
}

// Pointer returns the RFC 6901 JSON Pointer of n from the document root:
// "" for the root, "/steps/0/allowedTools/2" for a nested value, with "~"
// and "/" in member names escaped as "~0" and "~1".
func (n *Node) Pointer() string {
	var b strings.Builder
	if !n.descend(func(p, c *Node) {
		b.WriteByte('/')
		if c.flags&flagMember != 0 {
			b.WriteString(EscapePointerToken(c.key()))
		} else {
			b.WriteString(strconv.Itoa(indexIn(p, c)))
		}
	}) {
		return ""
	}
	return b.String()
}

// EscapePointerToken escapes one reference token of a JSON Pointer
// (RFC 6901 section 3): "~" becomes "~0" and "/" becomes "~1".
func EscapePointerToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// Walk calls fn for n and every value below it, depth first in source
// order, until fn returns false for a node (its children are then skipped).
func Walk(n *Node, fn func(*Node) bool) {
	if n == nil || !fn(n) {
		return
	}
	k := n.kidBlock()
	for i := range k {
		Walk(&k[i], fn)
	}
}

// Lines maps byte offsets of one source text to 1-based lines and byte
// columns.
type Lines struct {
	starts []int32 // byte offset of the first byte of each line (sources are at most MaxSizeLimit bytes)
}

// NewLines indexes the line starts of src. Lines end at "\n"; a "\r"
// before it counts as part of the line.
func NewLines(src []byte) *Lines {
	// Offsets past 2 GiB cannot be held: index only the first 2 GiB (the
	// reader never reads more than MaxSizeLimit bytes).
	src = src[:min(len(src), 1<<31-1)]
	starts := make([]int32, 1, 1+len(src)/32)
	for i := 0; ; {
		j := bytes.IndexByte(src[i:], '\n')
		if j < 0 {
			break
		}
		i += j + 1
		starts = append(starts, int32(i))
	}
	return &Lines{starts: starts}
}

// Position returns the 1-based line and 1-based byte column of offset.
func (l *Lines) Position(offset int) (line, col int) {
	i := sort.Search(len(l.starts), func(i int) bool { return int(l.starts[i]) > offset }) - 1
	if i < 0 {
		i = 0
	}
	return i + 1, offset - int(l.starts[i]) + 1
}

// Value converts n to plain Go values: nil, bool, json.Number (the literal
// text, so no precision is lost), string, map[string]any (first occurrence
// of a duplicate name wins) and []any. This is the shape JSON Schema
// libraries take.
func (n *Node) Value() any {
	if n == nil {
		return nil
	}
	switch n.Kind {
	case Bool:
		return n.Bool()
	case Number:
		return json.Number(n.Text())
	case String:
		return n.Text()
	case Object:
		m := make(map[string]any, n.Len())
		for name, v := range n.Members() {
			if _, dup := m[name]; !dup {
				m[name] = v.Value()
			}
		}
		return m
	case Array:
		a := make([]any, n.Len())
		for i, e := range n.Elems() {
			a[i] = e.Value()
		}
		return a
	}
	return nil
}
