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
		for _, m := range n.Members {
			h.WriteString(m.Name)
			h.WriteByte(0)
			hashNode(h, m.Value)
		}
		h.WriteByte('}')
	case syntax.Array:
		for _, e := range n.Elems {
			hashNode(h, e)
		}
		h.WriteByte(']')
	default:
		h.WriteString(n.Text)
		h.WriteByte(0)
	}
}

// sameValue reports whether a and b hold the same JSON value written the
// same way: same kinds, texts, member names and member order.
func sameValue(a, b *syntax.Node) bool {
	if a.Kind != b.Kind || a.Text != b.Text || len(a.Members) != len(b.Members) || len(a.Elems) != len(b.Elems) {
		return false
	}
	for i := range a.Members {
		if a.Members[i].Name != b.Members[i].Name || !sameValue(a.Members[i].Value, b.Members[i].Value) {
			return false
		}
	}
	for i := range a.Elems {
		if !sameValue(a.Elems[i], b.Elems[i]) {
			return false
		}
	}
	return true
}
