package validate

import (
	"github.com/openplaybook/openplaybook/internal/suggest"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/syntax"
)

// ruleUnusedTool gives advice about embedded tool definitions no step's
// allowedTools lists. A document embeds "the definitions of the tools it
// references" (spec, "Embedded tool definitions"), so a definition nothing
// references is dead weight at best, and at worst the sign of a step that
// was meant to allow it.
//
// So that one mistake is reported once, a tool counts as listed when an
// allowedTools pattern covers it (allowed-tools-form's error), when it is
// the "did you mean" of an entry that names no embedded tool (tool-name's
// or allowed-tools-resolve's error), or when a step lists it under a
// misspelt or mistyped allowedTools member (the reader's error) or as the
// "ref" of a per-reference object (allowed-tools-form's error); and
// nothing is reported when the steps could not be read.
type ruleUnusedTool struct{}

func (ruleUnusedTool) Name() string { return "unused-tool" }
func (ruleUnusedTool) Description() string {
	return "every embedded tool is listed in some step's allowedTools"
}

func (ruleUnusedTool) Check(c *Context) {
	d := c.Doc
	steps := d.Root.Member("steps")
	if d.Truncated || steps == nil || steps.Kind != syntax.Array || len(d.Steps) != steps.Len() {
		return // some steps could not be read
	}
	var names []string
	for _, t := range d.Tools {
		if t.Name != nil {
			names = append(names, t.Name.Value)
		}
	}
	used := map[string]bool{}
	var patterns []string
	list := func(v string) {
		switch {
		case isReferenceForm(v):
			patterns = append(patterns, v)
		case d.ToolNamed(v) != nil:
			used[v] = true
		case c.Opts.Registry != nil && toolNameProblem(v) == "" && c.Opts.Registry(v):
		default:
			if n, ok := suggest.Closest(v, names); ok {
				used[n] = true
			}
		}
	}
	for _, s := range d.Steps {
		for name, v := range s.Node.Members() {
			if name != "allowedTools" && contains(playbook.StepMembers, name) {
				continue
			}
			switch v.Kind {
			case syntax.String:
				list(v.Text())
			case syntax.Array:
				for _, e := range v.Elems() {
					if e.Kind == syntax.Object {
						e = e.Member("ref") // the per-reference object form
					}
					if e != nil && e.Kind == syntax.String {
						list(e.Text())
					}
				}
			}
		}
	}
	seen := map[string]bool{}
	for _, t := range d.Tools {
		if t.Name == nil || seen[t.Name.Value] {
			continue // unnamed: required; repeated: tool-name-unique
		}
		n := t.Name.Value
		seen[n] = true
		if used[n] || coveredByPattern(n, patterns) {
			continue
		}
		c.Infof(t.Name.Node, "embedded tool %q is not in any step's \"allowedTools\"; remove it or allow it where it is used", n)
	}
}

func coveredByPattern(name string, patterns []string) bool {
	for _, p := range patterns {
		if len(patternMatches(p, []string{name})) > 0 {
			return true
		}
	}
	return false
}
