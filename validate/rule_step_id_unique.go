package validate

// ruleStepIDUnique is not written yet (TODO: helper fills it in).
type ruleStepIDUnique struct{}

func (ruleStepIDUnique) Name() string        { return "step-id-unique" }
func (ruleStepIDUnique) Description() string { return "TODO" }
func (ruleStepIDUnique) Check(c *Context)    {}
