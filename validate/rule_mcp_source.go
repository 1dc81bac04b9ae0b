package validate

import (
	"github.com/openplaybook/openplaybook/playbook"
)

// ruleMCPSource checks embedded definitions against the MCP family
// (docs/format.md, "tools: embedded tool definitions": "source: "mcp"
// exactly when the name is in the MCP family; its server is declared in
// requires.mcpServers and the name is in that server's toolNames"; spec
// "The allowedTools list": "MCP tools, composed as mcp.<server>.<tool>
// where <server> is a logical name the document declares in
// requires.mcpServers").
//
// Malformed names are the tool-name rule's, unknown sources the enum
// rule's. allowedTools entries without an embedded definition are
// allowed-tools-resolve's; this rule looks at embedded definitions only.
type ruleMCPSource struct{}

func (ruleMCPSource) Name() string { return "mcp-source" }
func (ruleMCPSource) Description() string {
	return `source is "mcp" exactly for mcp.<server>.<tool> names, whose server is declared and lists the name in toolNames`
}

func (ruleMCPSource) Check(c *Context) {
	d := c.Doc
	servers := map[string]*mcpServerIndex{}
	var serverNames []string
	// listedByMisnamed holds the toolNames of servers whose name is
	// malformed ("Acme", a URL): mcp-server-name reports the name, and
	// the tools it lists are not reported again as undeclared.
	listedByMisnamed := map[string]bool{}
	if d.Requires != nil {
		for _, s := range d.Requires.MCPServers {
			if s.Name != nil && servers[s.Name.Value] == nil {
				servers[s.Name.Value] = &mcpServerIndex{s: s}
				if mcpServerNameRE.MatchString(s.Name.Value) {
					serverNames = append(serverNames, s.Name.Value)
				}
			}
			if s.Name != nil && !mcpServerNameRE.MatchString(s.Name.Value) {
				for _, v := range s.ToolNames.Values() {
					listedByMisnamed[v] = true
				}
			}
		}
	}
	var sugg suggester
	for _, t := range d.Tools {
		if t.Name == nil || toolNameProblem(t.Name.Value) != "" {
			continue
		}
		name := t.Name.Value
		server, _, isMCP := mcpParts(name)
		if t.Source != nil && contains(playbook.Sources, t.Source.Value) {
			switch {
			case isMCP && t.Source.Value != "mcp":
				c.Errorf(t.Source.Node, "tool %q is named in the MCP family (mcp.<server>.<tool>), so its source must be %q, not %q; a %s tool needs a name outside that family",
					name, "mcp", t.Source.Value, t.Source.Value)
			case !isMCP && t.Source.Value == "mcp":
				c.Errorf(t.Source.Node, "tool %q has source %q but its name is not of the form mcp.<server>.<tool>; name it after its server's logical name in requires.mcpServers and the tool's name on that server, or give it source %q or %q",
					name, "mcp", "primitive", "connector")
			}
		}
		if !isMCP {
			continue
		}
		x := servers[server]
		if x == nil && (d.Requires == nil || !wholeMember(d.Requires.Node, "mcpServers") || listedByMisnamed[name]) {
			continue // requires is missing (reported by required) or cut off, or the server is misnamed
		}
		if x == nil {
			c.Errorf(t.Name.Node, "MCP server %q of tool %q is not declared in requires.mcpServers%s; add {\"name\": %q, \"toolNames\": [%q]} to requires.mcpServers",
				server, name, sugg.phrase(server, serverNames), server, name)
			continue
		}
		if x.listed(name) || !wholeMember(x.s.Node, "toolNames") {
			continue
		}
		if _, typo := sugg.closest(name, x.unembedded(d)); typo {
			// A close toolNames entry has no definition: a typo on one
			// side, which mcp-tool-names reports (with a "did you
			// mean") at that entry.
			continue
		}
		c.Errorf(t.Name.Node, "tool %q is not listed in %q of MCP server %q; add it there (a document lists every MCP tool it embeds under its server)",
			name, "toolNames", server)
	}
}

// mcpServerIndex answers questions about one MCP server's toolNames in
// constant time, building its indexes on first use.
type mcpServerIndex struct {
	s     *playbook.MCPServer
	names map[string]bool
	unemb []string
	built bool
}

func (x *mcpServerIndex) listed(name string) bool {
	if x.names == nil {
		x.names = stringSet(x.s.ToolNames)
	}
	return x.names[name]
}

// unembedded returns the toolNames entries that name no embedded tool.
func (x *mcpServerIndex) unembedded(d *playbook.Document) []string {
	if !x.built {
		x.built = true
		for _, v := range x.s.ToolNames.Values() {
			if d.ToolNamed(v) == nil {
				x.unemb = append(x.unemb, v)
			}
		}
	}
	return x.unemb
}
