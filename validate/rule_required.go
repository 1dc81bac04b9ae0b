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
	// valid lists the object's members: one of them is never taken for a
	// misspelling of another ("outputSchema" is not a bad "inputSchema").
	needL := func(obj *syntax.Node, label func() string, valid []string, names ...string) {
		if obj == nil || obj.Kind != syntax.Object {
			return
		}
		for _, n := range names {
			if obj.Member(n) == nil {
				msg := ""
				if m := notIt(obj, n, valid); m != "" {
					msg = " (" + m + ")"
				}
				c.Errorf(obj, "%s is missing required member %q%s", label(), n, msg)
			}
		}
	}
	need := func(obj *syntax.Node, what string, valid []string, names ...string) {
		needL(obj, func() string { return what }, valid, names...)
	}
	need(d.Root, "the document", playbook.DocumentMembers, "openplaybook", "manifest", "requires", "tools", "steps")
	if d.Manifest != nil {
		need(d.Manifest.Node, `"manifest"`, playbook.ManifestMembers, playbook.ManifestMembers...)
	}
	if d.Requires != nil {
		need(d.Requires.Node, `"requires"`, playbook.RequiresMembers, "connections")
		if v, ok := formatVersion(d); !ok || v.minor >= 6 {
			for _, n := range []string{"mcpServers", "secrets"} {
				if d.Requires.Node.Member(n) == nil {
					msg := ""
					if m := notIt(d.Requires.Node, n, playbook.RequiresMembers); m != "" {
						msg = "; " + m
					}
					c.Errorf(d.Requires.Node, "%q is missing required member %q (required from format 1.6 on; write %q: [] when there are none%s)", "requires", n, n, msg)
				}
			}
		}
		for _, x := range d.Requires.Connections {
			need(x.Node, "connection", playbook.ConnectionMembers, "provider", "authKind")
		}
		for _, x := range d.Requires.MCPServers {
			need(x.Node, "MCP server", playbook.MCPServerMembers, "name")
		}
		for _, x := range d.Requires.Secrets {
			need(x.Node, "secret", playbook.SecretMembers, "name", "purpose")
		}
	}
	for _, t := range d.Tools {
		needL(t.Node, func() string { return toolLabel(t) }, playbook.ToolMembers, "name", "source", "description", "permissions", "inputSchema", "outputSchema")
	}
	if steps := d.Root.Member("steps"); steps != nil && steps.Kind == syntax.Array && steps.Len() == 0 {
		c.Errorf(steps, "%q is empty; a playbook has at least one step (the first is the entry step)", "steps")
	}
	for _, s := range d.Steps {
		what := func() string { return stepLabel(s) }
		needL(s.Node, what, playbook.StepMembers, "id", "kind", "purpose")
		if playbook.Str(s.Kind) == "agent" {
			needL(s.Node, what, playbook.StepMembers, "agent", "allowedTools")
		}
	}
}

// notIt names, for a message about missing member name, a member of obj
// that looks meant to be it: a case variant or a close misspelling that
// is none of the object's valid members (unknown-member or member-case
// reports that one too, with its fix), as a clause for the message. It
// returns "" when there is none.
// Both are reported: the misspelt member is not read, so the required one
// is missing whatever its neighbour is called.
func notIt(obj *syntax.Node, name string, valid []string) string {
	for mname := range obj.Members() {
		if mname == name || contains(valid, mname) {
			continue
		}
		if c, ok := suggest.Closest(mname, []string{name}); strings.EqualFold(mname, name) || ok && c == name {
			return fmt.Sprintf("member %q is not it: member names are exact", mname)
		}
	}
	return ""
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
