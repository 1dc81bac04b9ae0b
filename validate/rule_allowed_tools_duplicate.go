package validate

// ruleAllowedToolsDuplicate warns about a tool name listed more than once
// in one step's allowedTools (docs/format.md, "Consistency the validator
// enforces": "a name listed twice in one allowedTools is a warning"). The
// list means the same either way, so it is not an error, but a repeat is
// often a different name mistyped as one already there. Names are compared
// byte for byte; patterns and malformed names are left to the
// allowed-tools-form and tool-name rules.
type ruleAllowedToolsDuplicate struct{}

func (ruleAllowedToolsDuplicate) Name() string { return "allowed-tools-duplicate" }
func (ruleAllowedToolsDuplicate) Description() string {
	return "a step's allowedTools lists each tool once"
}

func (ruleAllowedToolsDuplicate) Check(c *Context) {
	for _, s := range c.Doc.Steps {
		if s.AllowedTools == nil {
			continue
		}
		first := map[string]int{}
		for _, a := range s.AllowedTools.Items {
			if isReferenceForm(a.Value) || toolNameProblem(a.Value) != "" {
				continue
			}
			if j, dup := first[a.Value]; dup {
				c.Warnf(a.Node, "tool %q is listed twice in \"allowedTools\" of %s (first at index %d); list it once", a.Value, stepLabel(s), j)
				continue
			}
			first[a.Value] = elemIndex(s.AllowedTools.Node, a.Node)
		}
	}
}
