package validate

// ruleUnusedTool is not written yet (TODO: helper fills it in).
type ruleUnusedTool struct{}

func (ruleUnusedTool) Name() string        { return "unused-tool" }
func (ruleUnusedTool) Description() string { return "TODO" }
func (ruleUnusedTool) Check(c *Context)    {}
