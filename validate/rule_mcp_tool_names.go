package validate

// ruleMCPToolNames checks requires.mcpServers[].toolNames: every entry of
// server S is named mcp.S.<tool>, and the document embeds a definition of
// it (docs/format.md, "requires": "toolNames (the mcp.<name>.* tool names
// used; each must be embedded)"; spec "The requires declaration":
// "mcpServers[].toolNames — The mcp.<name>.* tool names this playbook
// references from this server"; "A document carries the definitions of
// the tools it references in its tools array").
//
// Malformed names are the tool-name rule's. The other direction (an
// embedded MCP tool missing from its server's toolNames) is mcp-source's.
type ruleMCPToolNames struct{}

func (ruleMCPToolNames) Name() string { return "mcp-tool-names" }
func (ruleMCPToolNames) Description() string {
	return "each toolNames entry of MCP server S is an embedded tool named mcp.S.<tool>"
}

func (ruleMCPToolNames) Check(c *Context) {
	d := c.Doc
	if d.Requires == nil {
		return
	}
	var embeddedMCP []string
	for _, t := range d.Tools {
		if t.Name != nil {
			if _, _, ok := mcpParts(t.Name.Value); ok {
				embeddedMCP = append(embeddedMCP, t.Name.Value)
			}
		}
	}
	var sugg suggester
	for _, s := range d.Requires.MCPServers {
		if s.Name == nil || s.ToolNames == nil || !mcpServerNameRE.MatchString(s.Name.Value) {
			// A missing or malformed server name is reported by the
			// required and mcp-server-name rules; its entries cannot be
			// checked against it.
			continue
		}
		server := s.Name.Value
		prefix := "mcp." + server + "."
		for _, n := range s.ToolNames.Items {
			name := n.Value
			if toolNameProblem(name) != "" {
				continue
			}
			other, tool, isMCP := mcpParts(name)
			switch {
			case !isMCP:
				c.Errorf(n.Node, "toolNames entry %q of MCP server %q is not an MCP tool name; list only names of the form %q here",
					name, server, prefix+"<tool>")
				continue
			case other != server:
				c.Errorf(n.Node, "toolNames entry %q of MCP server %q names server %q; list it under %q, or name it %q if server %q provides it",
					name, server, other, other, prefix+tool, server)
				continue
			}
			if d.ToolNamed(name) == nil && wholeMember(d.Root, "tools") {
				c.Errorf(n.Node, "toolNames entry %q of MCP server %q has no embedded definition%s; embed its definition in \"tools\" (a document carries the definitions of the tools it names)",
					name, server, sugg.phrase(name, embeddedMCP))
			}
		}
	}
}
