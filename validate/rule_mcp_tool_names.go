package validate

// ruleMCPToolNames is not written yet (TODO: helper fills it in).
type ruleMCPToolNames struct{}

func (ruleMCPToolNames) Name() string        { return "mcp-tool-names" }
func (ruleMCPToolNames) Description() string { return "TODO" }
func (ruleMCPToolNames) Check(c *Context)    {}
