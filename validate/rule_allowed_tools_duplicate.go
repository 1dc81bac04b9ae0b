package validate

// ruleAllowedToolsDuplicate is not written yet (TODO: helper fills it in).
type ruleAllowedToolsDuplicate struct{}

func (ruleAllowedToolsDuplicate) Name() string        { return "allowed-tools-duplicate" }
func (ruleAllowedToolsDuplicate) Description() string { return "TODO" }
func (ruleAllowedToolsDuplicate) Check(c *Context)    {}
