package validate

// ruleMCPCapabilitiesReserved is not written yet (TODO: helper fills it in).
type ruleMCPCapabilitiesReserved struct{}

func (ruleMCPCapabilitiesReserved) Name() string        { return "mcp-capabilities-reserved" }
func (ruleMCPCapabilitiesReserved) Description() string { return "TODO" }
func (ruleMCPCapabilitiesReserved) Check(c *Context)    {}
