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
	"sort"
	"strconv"
	"strings"
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
// For a String node Text is the unescaped value; for a Number node it is the
// number's literal text (so no precision is lost); for a Bool node it is
// "true" or "false". Members holds an object's members in source order,
// duplicates included; Elems holds an array's elements.
type Node struct {
	Kind    Kind
	inArray bool  // n is an element of its parent array (else a member)
	idx     int32 // n's index in its parent's Members or Elems
	Text    string
	Members []Member
	Elems   []*Node

	// Offset is the byte offset of the value's first byte; End is the
	// offset just past its last byte. End == Offset for an object or array
	// cut off by a syntax error (its closing delimiter was never read).
	// They are 32-bit, which [MaxSizeLimit] allows, to keep nodes small.
	Offset, End int32

	parent *Node
}

// Member is one name/value pair of an object.
type Member struct {
	// Name is the unescaped member name.
	Name string
	// NameOffset is the byte offset of the name's opening quote.
	NameOffset int
	Value      *Node
}

// Bool reports the value of a Bool node (false for any other kind).
func (n *Node) Bool() bool { return n != nil && n.Kind == Bool && n.Text == "true" }

// Member returns the value of the first member called name, or nil. Names
// are compared byte for byte.
func (n *Node) Member(name string) *Node {
	if n == nil || n.Kind != Object {
		return nil
	}
	for i := range n.Members {
		if n.Members[i].Name == name {
			return n.Members[i].Value
		}
	}
	return nil
}

// Parent returns the object or array holding n, or nil for the root.
func (n *Node) Parent() *Node { return n.parent }

// Key returns the member name under which n sits in its parent object, and
// false when the parent is an array or n is the root.
func (n *Node) Key() (string, bool) {
	if n.parent == nil || n.inArray || int(n.idx) >= len(n.parent.Members) {
		return "", false
	}
	return n.parent.Members[n.idx].Name, true
}

// Pointer returns the RFC 6901 JSON Pointer of n from the document root:
// "" for the root, "/steps/0/allowedTools/2" for a nested value, with "~"
// and "/" in member names escaped as "~0" and "~1".
func (n *Node) Pointer() string {
	var parts []string
	for c := n; c != nil && c.parent != nil; c = c.parent {
		if c.inArray {
			parts = append(parts, strconv.Itoa(int(c.idx)))
		} else if int(c.idx) < len(c.parent.Members) {
			parts = append(parts, EscapePointerToken(c.parent.Members[c.idx].Name))
		}
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(parts[i])
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
	for _, m := range n.Members {
		Walk(m.Value, fn)
	}
	for _, e := range n.Elems {
		Walk(e, fn)
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
		return json.Number(n.Text)
	case String:
		return n.Text
	case Object:
		m := make(map[string]any, len(n.Members))
		for _, mem := range n.Members {
			if _, dup := m[mem.Name]; !dup {
				m[mem.Name] = mem.Value.Value()
			}
		}
		return m
	case Array:
		a := make([]any, len(n.Elems))
		for i, e := range n.Elems {
			a[i] = e.Value()
		}
		return a
	}
	return nil
}
