package validate

// ruleJSONSchema is not written yet (TODO: helper fills it in).
type ruleJSONSchema struct{}

func (ruleJSONSchema) Name() string        { return "json-schema" }
func (ruleJSONSchema) Description() string { return "TODO" }
func (ruleJSONSchema) Check(c *Context)    {}
