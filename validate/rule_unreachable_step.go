package validate

import (
	"fmt"

	"github.com/openplaybook/openplaybook/internal/suggest"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/syntax"
)

// ruleUnreachableStep warns about steps no run can reach: the first step is
// the entry step (docs/format.md, "Envelope"), and a run moves only along
// "next" and "onReject" (docs/format.md, "Consistency the validator
// enforces": "unreachable steps are warnings").
//
// So that one mistake is reported once, every reference is followed
// whatever the step's kind (a misplaced member is step-members' error), a
// reference to no step is followed to the step its "did you mean" names
// (the reference is step-ref's error), steps without an id or repeating an
// earlier id are left to the required and step-id-unique rules, and
// nothing is reported when a syntax error cut the document short.
type ruleUnreachableStep struct{}

func (ruleUnreachableStep) Name() string { return "unreachable-step" }
func (ruleUnreachableStep) Description() string {
	return `every step can be reached from the entry step through "next" or "onReject"`
}

func (ruleUnreachableStep) Check(c *Context) {
	d := c.Doc
	arr := d.Root.Member("steps")
	if d.Truncated || arr == nil || arr.Kind != syntax.Array || arr.Len() == 0 || len(d.Steps) == 0 || d.Steps[0].Node != arr.Child(0) {
		return // no entry step to start from
	}
	var ids []string
	for _, s := range d.Steps {
		if s.ID != nil && d.StepWithID(s.ID.Value) == s {
			ids = append(ids, s.ID.Value)
		}
	}
	target := func(ref *playbook.String) *playbook.Step {
		if t := d.StepWithID(ref.Value); t != nil {
			return t
		}
		if id, ok := suggest.Closest(ref.Value, ids); ok {
			return d.StepWithID(id)
		}
		return nil
	}
	entry := d.Steps[0]
	reached := map[*playbook.Step]bool{entry: true}
	queue := []*playbook.Step{entry}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, ref := range []*playbook.String{s.Next, s.OnReject} {
			if ref == nil {
				continue
			}
			if t := target(ref); t != nil && !reached[t] {
				reached[t] = true
				queue = append(queue, t)
			}
		}
	}
	from := "the entry step"
	if entry.ID != nil {
		from = fmt.Sprintf("the entry step %q", entry.ID.Value)
	}
	for _, s := range d.Steps {
		if reached[s] || s.ID == nil || d.StepWithID(s.ID.Value) != s {
			continue
		}
		c.Warnf(s.Node, "step %q is never reached: no \"next\" or \"onReject\" leads to it from %s; link it from another step or remove it", s.ID.Value, from)
	}
}
