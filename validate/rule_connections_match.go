package validate

// ruleConnectionsMatch is not written yet (TODO: helper fills it in).
type ruleConnectionsMatch struct{}

func (ruleConnectionsMatch) Name() string        { return "connections-match" }
func (ruleConnectionsMatch) Description() string { return "TODO" }
func (ruleConnectionsMatch) Check(c *Context)    {}
