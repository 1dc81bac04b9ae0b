package validate

// ruleReadTool checks read tools (riskClass "read"): they declare
// "sideEffecting": false explicitly and never "requiresApproval": true
// (spec "Embedded tool definitions": "Read tools declare sideEffecting:
// false and never require approval"; docs/format.md, "tools: embedded
// tool definitions").
type ruleReadTool struct{}

func (ruleReadTool) Name() string { return "read-tool" }
func (ruleReadTool) Description() string {
	return `read tools declare "sideEffecting": false and never "requiresApproval": true`
}

func (ruleReadTool) Check(c *Context) {
	for _, t := range c.Doc.Tools {
		if t.RiskClass == nil || t.RiskClass.Value != "read" {
			continue
		}
		switch {
		case t.SideEffecting == nil:
			if t.Node.Member("sideEffecting") == nil && !cutShort(t.Node) { // a wrong type is the reader's
				c.Errorf(t.RiskClass.Node, "read %s does not declare %q; read tools declare %s explicitly",
					toolLabel(t), "sideEffecting", `"sideEffecting": false`)
			}
		case t.SideEffecting.Value:
			c.Errorf(t.SideEffecting.Node, "read %s has %s; read tools have no side effects: set it to false, or, if the tool changes something, raise its riskClass to what it changes (%q, %q or %q) and list its writes in %q",
				toolLabel(t), `"sideEffecting": true`, "internal", "customer_comms", "money", "dataScopeWrites")
		}
		if t.RequiresApproval != nil && t.RequiresApproval.Value {
			c.Errorf(t.RequiresApproval.Node, "read %s has %s; read tools never require approval: set it to false, or, if the tool changes something that needs a person's approval, raise its riskClass",
				toolLabel(t), `"requiresApproval": true`)
		}
	}
}
