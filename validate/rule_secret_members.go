package validate

// ruleSecretMembers is not written yet (TODO: helper fills it in).
type ruleSecretMembers struct{}

func (ruleSecretMembers) Name() string        { return "secret-members" }
func (ruleSecretMembers) Description() string { return "TODO" }
func (ruleSecretMembers) Check(c *Context)    {}
