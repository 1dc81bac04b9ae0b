package validate

import (
	"github.com/openplaybook/openplaybook/playbook"
)

// ruleConnectorType checks connectorType against source (docs/format.md,
// "tools: embedded tool definitions": "source: "connector" needs
// connectorType; that provider has an entry in requires.connections whose
// capabilities lists the tool. source: "primitive" (and mcp) has no
// connectorType"; spec "The requires declaration": "connections[].capabilities —
// Embedded tool names this playbook uses from this provider").
//
// To report each problem once: unknown sources and providers are the enum
// rule's; a tool named in the MCP family is mcp-source's; a provider that
// manifest.requiredConnectors lists but requires.connections lacks is
// connections-match's; a tool listed under another provider's connection
// is connection-capabilities'.
type ruleConnectorType struct{}

func (ruleConnectorType) Name() string { return "connector-type" }
func (ruleConnectorType) Description() string {
	return "connector tools name their provider in connectorType and are listed in its connection's capabilities; other tools have no connectorType"
}

func (ruleConnectorType) Check(c *Context) {
	d := c.Doc
	firstConn := map[string]*playbook.Connection{}
	if d.Requires != nil {
		for _, x := range d.Requires.Connections {
			if x.Provider != nil && firstConn[x.Provider.Value] == nil {
				firstConn[x.Provider.Value] = x
			}
		}
	}
	var required map[string]bool
	if d.Manifest != nil {
		required = stringSet(d.Manifest.RequiredConnectors)
	}
	// listed holds every name some connection lists in its capabilities.
	listed := map[string]bool{}
	if d.Requires != nil {
		for _, x := range d.Requires.Connections {
			for _, v := range x.Capabilities.Values() {
				listed[v] = true
			}
		}
	}
	for _, t := range d.Tools {
		if t.Source == nil || t.Name == nil {
			continue
		}
		name := t.Name.Value
		switch t.Source.Value {
		case "primitive", "mcp":
			if t.ConnectorType != nil {
				c.ErrorAtName(t.Node, "connectorType", "%s has source %q and so no %q; only connector tools name a provider: remove it, or make the source %q",
					toolLabel(t), t.Source.Value, "connectorType", "connector")
			}
			continue
		case "connector":
		default:
			continue
		}
		if _, _, isMCP := mcpParts(name); isMCP {
			continue
		}
		if t.ConnectorType == nil {
			if t.Node.Member("connectorType") == nil && !cutShort(t.Node) {
				c.Errorf(t.Source.Node, "connector %s has no %q; add the provider it comes from, one of %s",
					toolLabel(t), "connectorType", quoteList(playbook.Providers))
			}
			continue
		}
		provider := t.ConnectorType.Value
		if !contains(playbook.Providers, provider) || toolNameProblem(name) != "" {
			continue
		}
		conn := firstConn[provider]
		if conn == nil {
			if d.Requires == nil || !wholeMember(d.Requires.Node, "connections") ||
				d.Manifest == nil || !wholeMember(d.Manifest.Node, "requiredConnectors") ||
				required[provider] {
				continue
			}
			c.Errorf(t.ConnectorType.Node, "connector %s comes from %q, which has no entry in requires.connections; add %q to manifest.requiredConnectors and a requires.connections entry for it whose %q lists %q",
				toolLabel(t), provider, provider, "capabilities", name)
			continue
		}
		if !wholeMember(conn.Node, "capabilities") || listed[name] {
			// Listed under this connection, or under another one, which
			// connection-capabilities reports; or unknown after a syntax
			// error.
			continue
		}
		c.Errorf(t.ConnectorType.Node, "connector %s is not listed in %q of the %q connection in requires.connections; add %q there",
			toolLabel(t), "capabilities", provider, name)
	}
}
