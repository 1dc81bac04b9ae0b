package validate

// ruleAllowedToolsForm is not written yet (TODO: helper fills it in).
type ruleAllowedToolsForm struct{}

func (ruleAllowedToolsForm) Name() string        { return "allowed-tools-form" }
func (ruleAllowedToolsForm) Description() string { return "TODO" }
func (ruleAllowedToolsForm) Check(c *Context)    {}
