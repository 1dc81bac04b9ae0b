package validate

import "strconv"

// ruleMCPCapabilitiesReserved warns about non-empty
// requires.mcpServers[].capabilities (spec "The requires declaration":
// "mcpServers[].capabilities — Reserved best-effort capability hints;
// empty today"; docs/format.md, "requires": "capabilities (reserved;
// non-empty is a warning)").
type ruleMCPCapabilitiesReserved struct{}

func (ruleMCPCapabilitiesReserved) Name() string { return "mcp-capabilities-reserved" }
func (ruleMCPCapabilitiesReserved) Description() string {
	return "requires.mcpServers[].capabilities is reserved and empty today"
}

func (ruleMCPCapabilitiesReserved) Check(c *Context) {
	if c.Doc.Requires == nil {
		return
	}
	for _, s := range c.Doc.Requires.MCPServers {
		if s.Capabilities == nil || s.Capabilities.Node.Len() == 0 {
			continue
		}
		what := "an MCP server"
		if s.Name != nil && mcpServerNameRE.MatchString(s.Name.Value) {
			what = "MCP server " + strconv.Quote(s.Name.Value)
		}
		c.Warnf(s.Capabilities.Node, "%q of %s is reserved for future capability hints and empty today; write %q: [] (the tools used from the server go in %q)",
			"capabilities", what, "capabilities", "toolNames")
	}
}
