package validate

// ruleToolName is not written yet (TODO: helper fills it in).
type ruleToolName struct{}

func (ruleToolName) Name() string        { return "tool-name" }
func (ruleToolName) Description() string { return "TODO" }
func (ruleToolName) Check(c *Context)    {}
