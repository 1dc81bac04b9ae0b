package validate

// ruleManifestVersion is not written yet (TODO: helper fills it in).
type ruleManifestVersion struct{}

func (ruleManifestVersion) Name() string        { return "manifest-version" }
func (ruleManifestVersion) Description() string { return "TODO" }
func (ruleManifestVersion) Check(c *Context)    {}
