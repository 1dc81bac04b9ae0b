package validate

// ruleVersion is not written yet (TODO: helper fills it in).
type ruleVersion struct{}

func (ruleVersion) Name() string        { return "version" }
func (ruleVersion) Description() string { return "TODO" }
func (ruleVersion) Check(c *Context)    {}
