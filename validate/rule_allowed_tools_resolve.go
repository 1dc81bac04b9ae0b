package validate

import (
	"github.com/openplaybook/openplaybook/internal/suggest"
)

// ruleAllowedToolsResolve reports allowedTools entries that name no
// embedded tool definition (and, when a registry is given, no registry
// tool). Spec "The allowedTools list": "A name resolves against the
// document's own embedded tools array and the runtime's tool registry".
// Matching is byte for byte. Malformed names are left to the tool-name
// rule and patterns to allowed-tools-form.
type ruleAllowedToolsResolve struct{}

func (ruleAllowedToolsResolve) Name() string { return "allowed-tools-resolve" }
func (ruleAllowedToolsResolve) Description() string {
	return "every allowedTools entry names an embedded tool definition (or a registry tool)"
}

func (ruleAllowedToolsResolve) Check(c *Context) {
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
		for _, a := range s.AllowedTools.Items {
			if isReferenceForm(a.Value) || toolNameProblem(a.Value) != "" || c.Doc.ToolNamed(a.Value) != nil {
				continue
			}
			if c.Opts.Registry != nil && c.Opts.Registry(a.Value) {
				continue
			}
			// With a registry, the name is in neither: pin cannot add it.
			if c.Opts.Registry != nil {
				c.Errorf(a.Node, "tool %q in %s is not defined in the document's tools or the registry%s; fix the name, or embed a definition in \"tools\"",
					a.Value, stepLabel(s), suggest.Phrase(a.Value, names))
				continue
			}
			c.Errorf(a.Node, "tool %q in %s is not defined in the document's tools%s; embed its definition in \"tools\" (openplaybook pin --write adds it from the registry)",
				a.Value, stepLabel(s), suggest.Phrase(a.Value, names))
		}
	}
}
