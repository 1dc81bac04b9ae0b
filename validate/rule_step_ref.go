package validate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/openplaybook/openplaybook/internal/suggest"
	"github.com/openplaybook/openplaybook/playbook"
)

// ruleStepRef reports step references that go nowhere or loop forever
// (docs/format.md, "Consistency the validator enforces": "Step graph:
// next/onReject resolve").
//
// Every "next" and every gate's "onReject" must name the id of a step in
// the document, byte for byte; a near miss gets a "did you mean". An
// agent step's "onReject" is not checked here: the step-members rule
// already reports it as out of place. When a syntax error cut the document
// short, references are not checked either: the step they name may be in
// the part that was never read.
//
// An agent step always goes on to its "next" (docs/format.md, "Steps"), so
// a loop made only of agent steps, including an agent step whose "next" is
// itself, can never end and no human ever sees it: that is an error too,
// reported once per loop at the first of its steps in document order. A
// loop that passes through a gate is fine: the gate is where a person
// decides, as in a gate whose "onReject" sends the run back to an earlier
// step for another draft.
type ruleStepRef struct{}

func (ruleStepRef) Name() string { return "step-ref" }
func (ruleStepRef) Description() string {
	return `"next" and "onReject" name existing steps, and agent steps do not loop among themselves`
}

func (ruleStepRef) Check(c *Context) {
	d := c.Doc
	var ids []string // for messages and suggestions, in document order
	for _, s := range d.Steps {
		if s.ID != nil && d.StepWithID(s.ID.Value) == s {
			ids = append(ids, s.ID.Value)
		}
	}
	truncated := d.Truncated
	check := func(s *playbook.Step, member string, ref *playbook.String) {
		if ref == nil || truncated || d.StepWithID(ref.Value) != nil {
			return
		}
		c.Errorf(ref.Node, "%q of %s is %+q, which is not the id of any step%s; the step ids are %s",
			member, stepLabel(s), ref.Value, suggest.Phrase(ref.Value, ids), quoteList(ids))
	}
	for _, s := range d.Steps {
		check(s, "next", s.Next)
		if playbook.Str(s.Kind) != "agent" {
			check(s, "onReject", s.OnReject)
		}
	}
	agentLoops(c)
}

// agentLoops reports each loop of agent steps joined by "next" alone, once,
// at the loop's first step in document order. Each agent step has at most
// one successor, so one walk per step that stops at any step already
// walked finds every loop in linear time.
func agentLoops(c *Context) {
	d := c.Doc
	// after returns the agent step s goes on to, or nil when s is not an
	// agent step or the run ends, reaches a step of another kind, or the
	// reference is broken.
	after := func(s *playbook.Step) *playbook.Step {
		if playbook.Str(s.Kind) != "agent" || s.Next == nil {
			return nil
		}
		t := d.StepWithID(s.Next.Value)
		if t == nil || playbook.Str(t.Kind) != "agent" {
			return nil
		}
		return t
	}
	order := make(map[*playbook.Step]int, len(d.Steps))
	for i, s := range d.Steps {
		order[s] = i
	}
	walk := make(map[*playbook.Step]int, len(d.Steps)) // step -> walk that first reached it
	for w, s := range d.Steps {
		var path []*playbook.Step
		t := s
		for t != nil {
			if _, done := walk[t]; done {
				break
			}
			walk[t] = w
			path = append(path, t)
			t = after(t)
		}
		if t == nil || walk[t] != w {
			continue // the walk ended, or joined an earlier walk
		}
		loop := path[slices.Index(path, t):]
		first := slices.MinFunc(loop, func(a, b *playbook.Step) int { return order[a] - order[b] })
		start := slices.Index(loop, first)
		loop = append(loop[start:len(loop):len(loop)], loop[:start]...)
		reportAgentLoop(c, loop)
	}
}

// reportAgentLoop reports loop, whose steps each go on to the next and the
// last back to the first.
func reportAgentLoop(c *Context, loop []*playbook.Step) {
	s := loop[0]
	if len(loop) == 1 {
		c.Errorf(s.Next.Node, "\"next\" of agent step %q is the step itself; an agent step always goes on to its \"next\", so the run would never end; point \"next\" at another step, put a gate step in between, or remove \"next\" to end the run", s.ID.Value)
		return
	}
	path := make([]string, 0, len(loop)+1)
	for _, t := range append(loop, s) {
		path = append(path, fmt.Sprintf("%q", t.ID.Value))
	}
	c.Errorf(s.Next.Node, "agent steps %s loop with no gate step between them; an agent step always goes on to its \"next\", so the run would never end; put a gate step in the loop or remove one of the \"next\" members", strings.Join(path, " -> "))
}
