package validate

import (
	"fmt"
	"strings"

	"github.com/openplaybook/openplaybook/playbook"
)

// stepKindMembers lists, for each step kind, the members a step of that
// kind may have (docs/format.md, "Steps").
var stepKindMembers = map[string][]string{
	"agent": {"id", "kind", "purpose", "agent", "allowedTools", "next"},
	"gate":  {"id", "kind", "purpose", "next", "onReject"},
}

// ruleStepMembers reports step members that do not belong to the step's
// kind (docs/format.md, "Steps"): "agent" and "allowedTools" are an agent
// step's, "onReject" a gate step's. A gate with "allowedTools" would read
// as if a human decision could call tools; an agent with "onReject" as if
// it could be rejected. Members no step may have are the reader's
// unknown-member concern, and steps of an unknown kind the enum rule's.
type ruleStepMembers struct{}

func (ruleStepMembers) Name() string { return "step-members" }
func (ruleStepMembers) Description() string {
	return "a step has only the members of its kind (agent or gate)"
}

func (ruleStepMembers) Check(c *Context) {
	for _, s := range c.Doc.Steps {
		kind := playbook.Str(s.Kind)
		valid, ok := stepKindMembers[kind]
		if !ok {
			continue
		}
		label := kind + " step"
		if s.ID != nil {
			label = fmt.Sprintf("%s step %q", kind, s.ID.Value)
		}
		seen := map[string]bool{}
		for name := range s.Node.Members() {
			if seen[name] || contains(valid, name) || !contains(playbook.StepMembers, name) {
				continue
			}
			seen[name] = true
			c.ErrorAtName(s.Node, name, "%s cannot have %q; %s step has %s", label, name, article(kind), quoteList(valid))
		}
	}
}

// article returns "an agent" or "a gate": kind with its indefinite article.
func article(kind string) string {
	if strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}
