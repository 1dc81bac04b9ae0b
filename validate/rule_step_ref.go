package validate

// ruleStepRef is not written yet (TODO: helper fills it in).
type ruleStepRef struct{}

func (ruleStepRef) Name() string        { return "step-ref" }
func (ruleStepRef) Description() string { return "TODO" }
func (ruleStepRef) Check(c *Context)    {}
