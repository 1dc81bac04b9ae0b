package validate

import (
	"fmt"
	"strings"

	"github.com/openplaybook/openplaybook/playbook"
)

// ReservedToolPrefix begins the names of the runtime's control tools,
// which an external agent is offered besides a step's allowed tools
// (openplaybook_finish_step; docs/serve.md). No document may name a tool
// that begins with it, in any case, or with "openplaybook." (whose wire
// name, each "." as "__", begins with it too).
const ReservedToolPrefix = "openplaybook_"

// ruleToolNameReserved reports tool names in the control tools' reserved
// namespace, wherever the document defines or allows a tool: such a name
// would be offered to an external agent beside the runtime's own control
// tools, under the same prefix, and read as one of them.
type ruleToolNameReserved struct{}

func (ruleToolNameReserved) Name() string { return "tool-name-reserved" }
func (ruleToolNameReserved) Description() string {
	return "no tool name begins with \"openplaybook_\" or \"openplaybook.\": the runtime's control tools use that prefix"
}

func reservedToolName(name string) bool {
	l := strings.ToLower(name)
	return strings.HasPrefix(l, ReservedToolPrefix) || strings.HasPrefix(l, "openplaybook.")
}

func (ruleToolNameReserved) Check(c *Context) {
	check := func(s *playbook.String, where func() string) {
		if s == nil || !reservedToolName(s.Value) {
			return
		}
		c.Errorf(s.Node, "tool name %+q in %s begins with %q, which is reserved for the runtime's control tools (such as openplaybook_finish_step); rename the tool", s.Value, where(), s.Value[:len(ReservedToolPrefix)])
	}
	d := c.Doc
	for _, t := range d.Tools {
		check(t.Name, func() string { return `"tools"` })
	}
	for _, s := range d.Steps {
		if s.AllowedTools == nil {
			continue
		}
		for _, a := range s.AllowedTools.Items {
			check(a, func() string { return fmt.Sprintf("%q of %s", "allowedTools", stepLabel(s)) })
		}
	}
}
