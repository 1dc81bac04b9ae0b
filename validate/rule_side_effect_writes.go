package validate

// ruleSideEffectWrites is not written yet (TODO: helper fills it in).
type ruleSideEffectWrites struct{}

func (ruleSideEffectWrites) Name() string        { return "side-effect-writes" }
func (ruleSideEffectWrites) Description() string { return "TODO" }
func (ruleSideEffectWrites) Check(c *Context)    {}
