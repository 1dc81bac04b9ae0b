package validate

// ruleUnreachableStep is not written yet (TODO: helper fills it in).
type ruleUnreachableStep struct{}

func (ruleUnreachableStep) Name() string        { return "unreachable-step" }
func (ruleUnreachableStep) Description() string { return "TODO" }
func (ruleUnreachableStep) Check(c *Context)    {}
