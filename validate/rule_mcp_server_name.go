package validate

// ruleMCPServerName is not written yet (TODO: helper fills it in).
type ruleMCPServerName struct{}

func (ruleMCPServerName) Name() string        { return "mcp-server-name" }
func (ruleMCPServerName) Description() string { return "TODO" }
func (ruleMCPServerName) Check(c *Context)    {}
