package validate

import "github.com/openplaybook/openplaybook/playbook"

// ruleToolNameUnique reports a tool definition whose name an earlier one
// already has (docs/format.md, "Consistency the validator enforces": "Tool
// names in tools are unique"). allowedTools entries resolve by name, so two
// definitions of one name would leave it open which one a step may call.
// Names are compared byte for byte; the repeat is reported, with the place
// of the first.
type ruleToolNameUnique struct{}

func (ruleToolNameUnique) Name() string { return "tool-name-unique" }
func (ruleToolNameUnique) Description() string {
	return `no two definitions in "tools" have the same name`
}

func (ruleToolNameUnique) Check(c *Context) {
	first := map[string]*playbook.String{}
	for _, t := range c.Doc.Tools {
		if t.Name == nil {
			continue
		}
		f, dup := first[t.Name.Value]
		if !dup {
			first[t.Name.Value] = t.Name
			continue
		}
		line, col := c.Doc.Lines.Position(int(f.Node.Offset))
		c.Errorf(t.Name.Node, "tool %q is defined twice in \"tools\" (first at line %d, column %d); define each tool once", t.Name.Value, line, col)
	}
}
