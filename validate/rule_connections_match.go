package validate

import (
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/syntax"
)

// ruleConnectionsMatch checks that requires.connections has exactly one
// entry per manifest.requiredConnectors member and none beside them (spec
// "The requires declaration": "connections — The machine-readable
// credential declaration — one entry per manifest.requiredConnectors
// member"; docs/format.md, "requires": "Exactly one entry per
// manifest.requiredConnectors member, and none beside them").
//
// Unknown providers are the enum rule's, so an entry whose provider is a
// typo of a required one (enum suggests the fix) does not also make that
// provider missing. Duplicates within requiredConnectors are
// manifest-connectors-unique's.
type ruleConnectionsMatch struct{}

func (ruleConnectionsMatch) Name() string { return "connections-match" }
func (ruleConnectionsMatch) Description() string {
	return "requires.connections has exactly one entry per manifest.requiredConnectors member"
}

func (ruleConnectionsMatch) Check(c *Context) {
	d := c.Doc
	if d.Requires == nil {
		return
	}
	// Duplicates: the second entry of a provider.
	first := map[string]*playbook.Connection{}
	for _, x := range d.Requires.Connections {
		if x.Provider == nil {
			continue
		}
		p := x.Provider.Value
		if f, dup := first[p]; dup {
			c.Errorf(x.Provider.Node, "provider %q has a second entry in requires.connections (the first is %s); keep one entry per provider, merging their scopes and capabilities",
				p, f.Node.Pointer())
			continue
		}
		first[p] = x
	}
	if d.Manifest == nil || d.Manifest.RequiredConnectors == nil || cutShort(d.Manifest.RequiredConnectors.Node) {
		return
	}
	required := d.Manifest.RequiredConnectors
	requiredSet := stringSet(required)
	// Extra entries: providers the manifest does not require.
	for _, x := range d.Requires.Connections {
		if x.Provider == nil || first[x.Provider.Value] != x || !contains(playbook.Providers, x.Provider.Value) {
			continue
		}
		if !requiredSet[x.Provider.Value] {
			c.Errorf(x.Provider.Node, "requires.connections has an entry for provider %q, which manifest.requiredConnectors does not list; add %q to manifest.requiredConnectors, or remove this entry",
				x.Provider.Value, x.Provider.Value)
		}
	}
	// Missing entries, reported once per provider at requires.connections.
	conns := d.Requires.Node.Member("connections")
	if conns == nil || conns.Kind != syntax.Array || cutShort(conns) {
		return // the required rule or the reader reports it
	}
	// typoFor holds the providers that enum suggests for the unknown
	// provider of some entry.
	typoFor := map[string]bool{}
	unknown := map[string]bool{}
	var sugg suggester
	for _, x := range d.Requires.Connections {
		if x.Provider == nil || contains(playbook.Providers, x.Provider.Value) || unknown[x.Provider.Value] {
			continue
		}
		unknown[x.Provider.Value] = true
		if best, ok := sugg.closest(x.Provider.Value, playbook.Providers); ok {
			typoFor[best] = true
		}
	}
	seen := map[string]bool{}
	for _, p := range required.Items {
		if seen[p.Value] || !contains(playbook.Providers, p.Value) {
			continue
		}
		seen[p.Value] = true
		if first[p.Value] != nil || typoFor[p.Value] {
			continue
		}
		c.Errorf(conns, "requires.connections has no entry for provider %q, which manifest.requiredConnectors lists; add {\"provider\": %q, \"authKind\": ..., \"scopes\": [], \"capabilities\": [...]} listing the %q tools the playbook uses",
			p.Value, p.Value, p.Value)
	}
}
