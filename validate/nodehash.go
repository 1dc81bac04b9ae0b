package validate

import (
	"hash/maphash"

	"github.com/openplaybook/openplaybook/syntax"
)

// nodeSeed seeds [nodeHash]; hashes are only compared within one run.
var nodeSeed = maphash.MakeSeed()

// nodeHash hashes the JSON value at n: kinds, texts, member names and
// order. Two nodes with [sameValue] have the same hash.
func nodeHash(n *syntax.Node) uint64 {
	var h maphash.Hash
	h.SetSeed(nodeSeed)
	hashNode(&h, n)
	return h.Sum64()
}

func hashNode(h *maphash.Hash, n *syntax.Node) {
	h.WriteByte(byte(n.Kind))
	switch n.Kind {
	case syntax.Object:
		for name, v := range n.Members() {
			h.WriteString(name)
			h.WriteByte(0)
			hashNode(h, v)
		}
		h.WriteByte('}')
	case syntax.Array:
		for _, e := range n.Elems() {
			hashNode(h, e)
		}
		h.WriteByte(']')
	default:
		h.WriteString(n.Text())
		h.WriteByte(0)
	}
}

// sameValue reports whether a and b hold the same JSON value written the
// same way: same kinds, texts, member names and member order.
func sameValue(a, b *syntax.Node) bool {
	if a.Kind != b.Kind || a.Text() != b.Text() || a.Len() != b.Len() {
		return false
	}
	for i := range a.Len() {
		x, y := a.Child(i), b.Child(i)
		if kx, _ := x.Key(); kx != mustKey(y) || !sameValue(x, y) {
			return false
		}
	}
	return true
}

// mustKey is n's member name, or "" for an element.
func mustKey(n *syntax.Node) string {
	k, _ := n.Key()
	return k
}
