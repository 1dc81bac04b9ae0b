package validate

import (
	"github.com/openplaybook/openplaybook/internal/suggest"
	"github.com/openplaybook/openplaybook/playbook"
)

// ruleEnum reports values outside the enumerations of the spec and of
// docs/format.md: provider and connectorType, authKind, source, riskClass,
// scope, and step kind. Matching is exact; a value close to a valid one
// gets a suggestion.
type ruleEnum struct{}

func (ruleEnum) Name() string { return "enum" }
func (ruleEnum) Description() string {
	return "enumerated members hold one of their listed values"
}

func (ruleEnum) Check(c *Context) {
	check := func(s *playbook.String, member string, valid []string) {
		if s == nil || contains(valid, s.Value) {
			return
		}
		c.Errorf(s.Node, "%q is not a valid %s%s; valid values are %s", s.Value, member, suggest.Phrase(s.Value, valid), quoteList(valid))
	}
	d := c.Doc
	if d.Manifest != nil && d.Manifest.RequiredConnectors != nil {
		for _, p := range d.Manifest.RequiredConnectors.Items {
			check(p, "requiredConnectors entry", playbook.Providers)
		}
	}
	if d.Requires != nil {
		for _, x := range d.Requires.Connections {
			check(x.Provider, "provider", playbook.Providers)
			check(x.AuthKind, "authKind", playbook.AuthKinds)
		}
	}
	for _, t := range d.Tools {
		check(t.Source, "source", playbook.Sources)
		check(t.RiskClass, "riskClass", playbook.RiskClasses)
		check(t.ConnectorType, "connectorType", playbook.Providers)
		check(t.Scope, "scope", playbook.Scopes)
	}
	for _, s := range d.Steps {
		if s.Kind != nil && !contains(playbook.StepKinds, s.Kind.Value) {
			c.Errorf(s.Kind.Node, "step kind %q is not known to format 1.6%s; the kinds are %s", s.Kind.Value, suggest.Phrase(s.Kind.Value, playbook.StepKinds), quoteList(playbook.StepKinds))
		}
	}
}
