package validate

// ruleStepMembers is not written yet (TODO: helper fills it in).
type ruleStepMembers struct{}

func (ruleStepMembers) Name() string        { return "step-members" }
func (ruleStepMembers) Description() string { return "TODO" }
func (ruleStepMembers) Check(c *Context)    {}
