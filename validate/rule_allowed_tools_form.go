package validate

import (
	"fmt"
	"path"
	"strings"

	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/syntax"
)

// ruleAllowedToolsForm reports allowedTools entries that are not tool
// names (docs/format.md, "Names": "allowedTools takes names only. Patterns
// (*, mcp.acme.*) and the per-reference object form ({"kind": ..., "ref":
// ...}, skill:// references) are not part of the 1.6 wire format: each is
// an error that says so, never a silent allow or a silent drop"; spec
// "Future direction"). It reports:
//
//   - patterns (anything with "*", "?" or "["), listing the embedded tools
//     the pattern would cover;
//   - skill:// references and other reference URIs;
//   - object elements, the per-reference object form;
//   - any other element that is not a string (the reader leaves
//     allowedTools elements to this rule).
//
// An allowedTools member that is not an array is the reader's type error.
type ruleAllowedToolsForm struct{}

func (ruleAllowedToolsForm) Name() string { return "allowed-tools-form" }
func (ruleAllowedToolsForm) Description() string {
	return "allowedTools lists tool names as strings: no patterns, skill:// references or per-reference objects"
}

func (ruleAllowedToolsForm) Check(c *Context) {
	var names []string
	for _, t := range c.Doc.Tools {
		if t.Name != nil {
			names = append(names, t.Name.Value)
		}
	}
	for _, s := range c.Doc.Steps {
		if s.AllowedTools == nil {
			continue
		}
		for _, e := range s.AllowedTools.Node.Elems() {
			allowedToolsEntryForm(c, s, e, names)
		}
	}
}

func allowedToolsEntryForm(c *Context, s *playbook.Step, e *syntax.Node, names []string) {
	switch e.Kind {
	case syntax.String:
		v := e.Text()
		if !isReferenceForm(v) {
			return
		}
		step := stepLabel(s)
		switch {
		case strings.HasPrefix(v, "skill://"):
			c.Errorf(e, "%+q in \"allowedTools\" of %s is a skill reference; skill:// references are planned for a future OpenPlaybook version and are not part of the 1.6 wire format; list tool names only", v, step)
		case strings.Contains(v, "://"):
			c.Errorf(e, "%+q in \"allowedTools\" of %s is a reference URI, not a tool name; the 1.6 wire format takes tool names only", v, step)
		default:
			covers := ""
			if m := patternMatches(v, names); len(m) > 0 {
				covers = fmt.Sprintf(" (here: %s)", quoteList(m))
			}
			c.Errorf(e, "%+q in \"allowedTools\" of %s is a pattern; patterns are not part of the 1.6 wire format; list each tool name%s", v, step, covers)
		}
	case syntax.Object:
		step := stepLabel(s)
		hint := "list the tool name as a string"
		if ref := e.Member("ref"); ref != nil && ref.Kind == syntax.String && toolNameProblem(ref.Text()) == "" {
			hint = fmt.Sprintf("write the tool name as a string: %q", ref.Text())
		}
		c.Errorf(e, "an entry of \"allowedTools\" of %s is an object; the per-reference object form ({\"kind\": ..., \"ref\": ...}) is a planned future direction, not part of the 1.6 wire format; %s", step, hint)
	default:
		c.Errorf(e, "\"allowedTools\" entries must be tool names (strings), got %s", e.Kind)
	}
}

// patternMatches returns the names the glob pattern p matches, in order
// ("*" matching any run of characters, dots included); none for a
// malformed pattern.
func patternMatches(p string, names []string) []string {
	var out []string
	for _, n := range names {
		if ok, err := path.Match(p, n); err == nil && ok {
			out = append(out, n)
		}
	}
	return out
}
