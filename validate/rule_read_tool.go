package validate

// ruleReadTool is not written yet (TODO: helper fills it in).
type ruleReadTool struct{}

func (ruleReadTool) Name() string        { return "read-tool" }
func (ruleReadTool) Description() string { return "TODO" }
func (ruleReadTool) Check(c *Context)    {}
