package validate

// ruleSideEffectWrites checks that side-effecting tools declare their
// writes: "sideEffecting": true needs a non-empty dataScopeWrites (spec
// "Embedded tool definitions": "write tools declare their side effects";
// docs/format.md, "tools: embedded tool definitions": "Side-effecting
// tools (sideEffecting: true) declare their writes: a non-empty
// dataScopeWrites").
//
// A read tool with "sideEffecting": true is read-tool's to report: the fix
// may be to say false rather than to add writes.
type ruleSideEffectWrites struct{}

func (ruleSideEffectWrites) Name() string { return "side-effect-writes" }
func (ruleSideEffectWrites) Description() string {
	return `side-effecting tools list what they write in a non-empty "dataScopeWrites"`
}

func (ruleSideEffectWrites) Check(c *Context) {
	for _, t := range c.Doc.Tools {
		if t.SideEffecting == nil || !t.SideEffecting.Value || t.RiskClass != nil && t.RiskClass.Value == "read" {
			continue
		}
		switch {
		case t.DataScopeWrites != nil && t.DataScopeWrites.Node.Len() == 0:
			c.Errorf(t.DataScopeWrites.Node, "side-effecting %s has an empty %q; list the data scopes it writes (side-effecting tools declare their writes)",
				toolLabel(t), "dataScopeWrites")
		case t.DataScopeWrites == nil && t.Node.Member("dataScopeWrites") == nil && !cutShort(t.Node):
			c.Errorf(t.SideEffecting.Node, "side-effecting %s does not declare %q; list the data scopes it writes in it, or set %s if the tool changes nothing",
				toolLabel(t), "dataScopeWrites", `"sideEffecting": false`)
		}
	}
}
