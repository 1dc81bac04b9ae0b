package validate

// ruleManifestConnectorsUnique is not written yet (TODO: helper fills it in).
type ruleManifestConnectorsUnique struct{}

func (ruleManifestConnectorsUnique) Name() string        { return "manifest-connectors-unique" }
func (ruleManifestConnectorsUnique) Description() string { return "TODO" }
func (ruleManifestConnectorsUnique) Check(c *Context)    {}
