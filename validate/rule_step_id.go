package validate

import "regexp"

// stepIDPattern is the form of a step id (docs/format.md, "Steps").
var stepIDPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// ruleStepID reports a step id that does not match ^[a-z][a-z0-9_-]*$
// (docs/format.md, "Steps": "Every step has id (unique,
// ^[a-z][a-z0-9_-]*$)"): a lowercase ASCII letter, then lowercase letters,
// digits, "_" or "-". Ids are compared byte for byte elsewhere, so an id
// with an upper-case letter, a space or a look-alike character is an
// error here rather than a near miss later.
type ruleStepID struct{}

func (ruleStepID) Name() string { return "step-id" }
func (ruleStepID) Description() string {
	return "each step id matches ^[a-z][a-z0-9_-]*$"
}

func (ruleStepID) Check(c *Context) {
	for _, s := range c.Doc.Steps {
		if s.ID == nil || stepIDPattern.MatchString(s.ID.Value) {
			continue
		}
		c.Errorf(s.ID.Node, "step id %+q is not valid; a step id is a lowercase letter followed by lowercase letters, digits, \"_\" or \"-\" (^[a-z][a-z0-9_-]*$), such as \"review\" or \"send_email\"", s.ID.Value)
	}
}
