package validate

// ruleManifestID is not written yet (TODO: helper fills it in).
type ruleManifestID struct{}

func (ruleManifestID) Name() string        { return "manifest-id" }
func (ruleManifestID) Description() string { return "TODO" }
func (ruleManifestID) Check(c *Context)    {}
