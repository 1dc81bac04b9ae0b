package validate

// ruleConnectorType is not written yet (TODO: helper fills it in).
type ruleConnectorType struct{}

func (ruleConnectorType) Name() string        { return "connector-type" }
func (ruleConnectorType) Description() string { return "TODO" }
func (ruleConnectorType) Check(c *Context)    {}
