package validate

import (
	"fmt"
	"strings"

	"github.com/openplaybook/openplaybook/internal/suggest"

	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/syntax"
)

// ruleRequired reports required members that are missing (docs/format.md,
// "Envelope", "Steps"; spec "Embedded tool definitions" and "The requires
// declaration"). requires.mcpServers and requires.secrets are required from
// format 1.6 on; earlier documents read them as [].
type ruleRequired struct{}

func (ruleRequired) Name() string { return "required" }
func (ruleRequired) Description() string {
	return "every member the format requires is present"
}

func (ruleRequired) Check(c *Context) {
	d := c.Doc
	if d.Truncated {
		return // what is missing may only be unread
	}
	// label names the object in a message; it is only called when a
	// member is missing, so a large valid document costs no formatting.
	needL := func(obj *syntax.Node, label func() string, names ...string) {
		if obj == nil || obj.Kind != syntax.Object {
			return
		}
		for _, n := range names {
			if obj.Member(n) == nil && !misspelt(obj, n) {
				c.Errorf(obj, "%s is missing required member %q", label(), n)
			}
		}
	}
	need := func(obj *syntax.Node, what string, names ...string) {
		needL(obj, func() string { return what }, names...)
	}
	need(d.Root, "the document", "openplaybook", "manifest", "requires", "tools", "steps")
	if d.Manifest != nil {
		need(d.Manifest.Node, `"manifest"`, playbook.ManifestMembers...)
	}
	if d.Requires != nil {
		need(d.Requires.Node, `"requires"`, "connections")
		if v, ok := formatVersion(d); !ok || v.minor >= 6 {
			for _, n := range []string{"mcpServers", "secrets"} {
				if d.Requires.Node.Member(n) == nil {
					c.Errorf(d.Requires.Node, "%q is missing required member %q (required from format 1.6 on; write %q: [] when there are none)", "requires", n, n)
				}
			}
		}
		for _, x := range d.Requires.Connections {
			need(x.Node, "connection", "provider", "authKind")
		}
		for _, x := range d.Requires.MCPServers {
			need(x.Node, "MCP server", "name")
		}
		for _, x := range d.Requires.Secrets {
			need(x.Node, "secret", "name", "purpose")
		}
	}
	for _, t := range d.Tools {
		needL(t.Node, func() string { return toolLabel(t) }, "name", "source", "description", "permissions", "inputSchema", "outputSchema")
	}
	if steps := d.Root.Member("steps"); steps != nil && steps.Kind == syntax.Array && len(steps.Elems) == 0 {
		c.Errorf(steps, "%q is empty; a playbook has at least one step (the first is the entry step)", "steps")
	}
	for _, s := range d.Steps {
		what := func() string { return stepLabel(s) }
		needL(s.Node, what, "id", "kind", "purpose")
		if playbook.Str(s.Kind) == "agent" {
			needL(s.Node, what, "agent", "allowedTools")
		}
	}
}

// misspelt reports whether obj has a member that is a case variant or a
// close misspelling of name: unknown-member or member-case reports that
// one, with the fix, so "missing" would say the same thing twice.
func misspelt(obj *syntax.Node, name string) bool {
	for _, m := range obj.Members {
		if strings.EqualFold(m.Name, name) {
			return true
		}
		if c, ok := suggest.Closest(m.Name, []string{name}); ok && c == name {
			return true
		}
	}
	return false
}

// toolLabel names a tool definition in messages.
func toolLabel(t *playbook.Tool) string {
	if t.Name != nil {
		return fmt.Sprintf("tool %q", t.Name.Value)
	}
	return "tool definition"
}

// stepLabel names a step in messages.
func stepLabel(s *playbook.Step) string {
	if s.ID != nil {
		return fmt.Sprintf("step %q", s.ID.Value)
	}
	return "step"
}
