package validate

// ruleStepID is not written yet (TODO: helper fills it in).
type ruleStepID struct{}

func (ruleStepID) Name() string        { return "step-id" }
func (ruleStepID) Description() string { return "TODO" }
func (ruleStepID) Check(c *Context)    {}
