package validate

import "github.com/openplaybook/openplaybook/syntax"

// cutShort reports whether n is an object or array that a syntax error cut
// short: the reader keeps what it read of it, but members or elements
// after the error are missing. A rule that reports something as absent
// must not conclude so from a cut-off value (the syntax error is the
// problem, and the reader reports it).
func cutShort(n *syntax.Node) bool {
	return n != nil && (n.Kind == syntax.Object || n.Kind == syntax.Array) && n.End <= n.Offset
}

// wholeMember reports whether the member name of obj was read in full: it
// is present and not cut off, or it is absent from an object that was
// read in full (so it is really absent). A nil obj is not whole.
func wholeMember(obj *syntax.Node, name string) bool {
	if obj == nil {
		return false
	}
	if v := obj.Member(name); v != nil {
		return !cutShort(v)
	}
	return !cutShort(obj)
}
