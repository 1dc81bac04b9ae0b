package validate

import (
	"github.com/openplaybook/openplaybook/playbook"
)

// ruleConnectionCapabilities checks requires.connections[].capabilities:
// every name is an embedded tool whose source is "connector" and whose
// connectorType is the connection's provider (spec "The requires
// declaration": "connections[].capabilities — Embedded tool names this
// playbook uses from this provider"; docs/format.md, "requires").
//
// Malformed names are the tool-name rule's; unknown providers the enum
// rule's; a connector tool without connectorType is connector-type's.
type ruleConnectionCapabilities struct{}

func (ruleConnectionCapabilities) Name() string { return "connection-capabilities" }
func (ruleConnectionCapabilities) Description() string {
	return "each connection's capabilities are embedded connector tools of that provider"
}

func (ruleConnectionCapabilities) Check(c *Context) {
	d := c.Doc
	if d.Requires == nil {
		return
	}
	toolsWhole := wholeMember(d.Root, "tools")
	var sugg suggester
	byProvider := map[string][]string{} // connector tool names by connectorType
	for _, t := range d.Tools {
		if t.Name != nil && playbook.Str(t.Source) == "connector" && t.ConnectorType != nil {
			byProvider[t.ConnectorType.Value] = append(byProvider[t.ConnectorType.Value], t.Name.Value)
		}
	}
	for _, x := range d.Requires.Connections {
		if x.Provider == nil || x.Capabilities == nil || !contains(playbook.Providers, x.Provider.Value) {
			continue
		}
		provider := x.Provider.Value
		candidates := byProvider[provider]
		for _, n := range x.Capabilities.Items {
			name := n.Value
			if toolNameProblem(name) != "" {
				continue
			}
			t := d.ToolNamed(name)
			switch {
			case t == nil && !toolsWhole:
				// the tool may be defined after a syntax error
			case t == nil:
				c.Errorf(n.Node, "capability %q of the %q connection is not an embedded tool%s; capabilities lists the embedded tool names the playbook uses from %q: embed its definition in \"tools\" or remove it",
					name, provider, sugg.phrase(name, candidates), provider)
			case t.Source == nil || !contains(playbook.Sources, t.Source.Value):
				// required or enum reports the source
			case t.Source.Value != "connector":
				c.Errorf(n.Node, "capability %q of the %q connection is a %s tool, not a connector tool; capabilities lists only connector tools of %q: remove it",
					name, provider, t.Source.Value, provider)
			case t.ConnectorType == nil || !contains(playbook.Providers, t.ConnectorType.Value):
				// connector-type or enum reports the connectorType
			case t.ConnectorType.Value != provider:
				c.Errorf(n.Node, "capability %q of the %q connection is a connector tool of %q (its connectorType); list it under the %q connection instead",
					name, provider, t.ConnectorType.Value, t.ConnectorType.Value)
			}
		}
	}
}
