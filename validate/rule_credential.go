package validate

// ruleCredential is not written yet (TODO: helper fills it in).
type ruleCredential struct{}

func (ruleCredential) Name() string        { return "credential" }
func (ruleCredential) Description() string { return "TODO" }
func (ruleCredential) Check(c *Context)    {}
