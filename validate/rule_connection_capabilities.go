package validate

// ruleConnectionCapabilities is not written yet (TODO: helper fills it in).
type ruleConnectionCapabilities struct{}

func (ruleConnectionCapabilities) Name() string        { return "connection-capabilities" }
func (ruleConnectionCapabilities) Description() string { return "TODO" }
func (ruleConnectionCapabilities) Check(c *Context)    {}
