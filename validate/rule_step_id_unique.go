package validate

import "github.com/openplaybook/openplaybook/playbook"

// ruleStepIDUnique reports a step whose id an earlier step already has
// (docs/format.md, "Steps": "id (unique, ...)"). next and onReject name
// steps by id, so a repeated id makes a reference ambiguous. The repeat is
// reported, with the place of the first.
type ruleStepIDUnique struct{}

func (ruleStepIDUnique) Name() string { return "step-id-unique" }
func (ruleStepIDUnique) Description() string {
	return "no two steps have the same id"
}

func (ruleStepIDUnique) Check(c *Context) {
	first := map[string]*playbook.Step{}
	for _, s := range c.Doc.Steps {
		if s.ID == nil {
			continue
		}
		f, dup := first[s.ID.Value]
		if !dup {
			first[s.ID.Value] = s
			continue
		}
		line, col := c.Doc.Lines.Position(int(f.ID.Node.Offset))
		c.Errorf(s.ID.Node, "step id %q is already used (first at line %d, column %d); step ids must be unique, so rename one of the steps", s.ID.Value, line, col)
	}
}
