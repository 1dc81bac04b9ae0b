package validate

// ruleMCPSource is not written yet (TODO: helper fills it in).
type ruleMCPSource struct{}

func (ruleMCPSource) Name() string        { return "mcp-source" }
func (ruleMCPSource) Description() string { return "TODO" }
func (ruleMCPSource) Check(c *Context)    {}
