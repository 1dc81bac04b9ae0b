package validate

import "github.com/openplaybook/openplaybook/syntax"

// ruleManifestConnectorsUnique reports a provider listed more than once in
// manifest.requiredConnectors (docs/format.md, "Envelope":
// "requiredConnectors (array of provider enum values, may be empty, no
// duplicates)"). Each repeat is reported where it stands, with the index of
// the first.
type ruleManifestConnectorsUnique struct{}

func (ruleManifestConnectorsUnique) Name() string { return "manifest-connectors-unique" }
func (ruleManifestConnectorsUnique) Description() string {
	return "manifest.requiredConnectors lists each provider once"
}

func (ruleManifestConnectorsUnique) Check(c *Context) {
	m := c.Doc.Manifest
	if m == nil || m.RequiredConnectors == nil {
		return
	}
	l := m.RequiredConnectors
	first := map[string]int{}
	for _, p := range l.Items {
		i := elemIndex(l.Node, p.Node)
		if j, dup := first[p.Value]; dup {
			c.Errorf(p.Node, "provider %q is listed twice in \"requiredConnectors\" (first at index %d); list each provider once", p.Value, j)
			continue
		}
		first[p.Value] = i
	}
}

// elemIndex returns the index of e among the elements of the array arr, or
// -1. It counts every element, whatever its type, so the index matches the
// JSON Pointer.
func elemIndex(arr, e *syntax.Node) int {
	if arr == nil {
		return -1
	}
	for i, x := range arr.Elems() {
		if x == e {
			return i
		}
	}
	return -1
}
