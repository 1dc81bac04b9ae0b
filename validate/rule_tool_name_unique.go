package validate

// ruleToolNameUnique is not written yet (TODO: helper fills it in).
type ruleToolNameUnique struct{}

func (ruleToolNameUnique) Name() string        { return "tool-name-unique" }
func (ruleToolNameUnique) Description() string { return "TODO" }
func (ruleToolNameUnique) Check(c *Context)    {}
