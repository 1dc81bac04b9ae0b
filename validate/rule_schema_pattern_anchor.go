package validate

import (
	"regexp/syntax"
	"strings"

	jsyntax "github.com/openplaybook/openplaybook/syntax"
)

// ruleSchemaPatternAnchor warns about a "pattern" that is not anchored at
// both ends. A JSON Schema pattern matches anywhere in the string (ECMA
// 262 semantics, not a full match): "[a-z]+" accepts "DROP TABLE x;" since
// it contains "x". A pattern is anchored when, read as a Go regular
// expression, every top-level alternative begins with ^ and ends with $
// (\A and \z count too; an escaped \$ does not). Patterns that do not
// compile are json-schema's.
type ruleSchemaPatternAnchor struct{}

func (ruleSchemaPatternAnchor) Name() string { return "schema-pattern-anchor" }
func (ruleSchemaPatternAnchor) Description() string {
	return `a schema "pattern" is anchored with ^ and $, since it otherwise matches any string that contains a match`
}

func (ruleSchemaPatternAnchor) Check(c *Context) {
	// Patterns known to be fine (anchored, or json-schema's), remembered:
	// the same pattern recurs in thousands of schemas.
	fine := map[string]bool{}
	for _, s := range c.embedded() {
		walkSchema(s.n, func(n *jsyntax.Node) {
			p := n.Member("pattern")
			if p == nil || p.Kind != jsyntax.String || fine[p.Text()] {
				return
			}
			re, err := syntax.Parse(p.Text(), syntax.Perl)
			if err != nil || anchored(re) {
				fine[p.Text()] = true
				return
			}
			c.Warnf(p, "%q %s in %s is not anchored, so it accepts any string that contains a match; write %s to match the whole string",
				"pattern", showValue(p.Text()), s.label(), showValue(anchoredForm(p.Text(), re)))
		})
	}
}

// anchored reports whether every top-level alternative of re begins at
// the start of the text and ends at its end.
func anchored(re *syntax.Regexp) bool {
	for re.Op == syntax.OpCapture && len(re.Sub) == 1 {
		re = re.Sub[0]
	}
	switch re.Op {
	case syntax.OpAlternate:
		for _, s := range re.Sub {
			if !anchored(s) {
				return false
			}
		}
		return true
	case syntax.OpConcat:
		return len(re.Sub) >= 2 && re.Sub[0].Op == syntax.OpBeginText && re.Sub[len(re.Sub)-1].Op == syntax.OpEndText
	}
	return false
}

// anchoredForm suggests the anchored pattern: ^ and $ around it, and a
// top-level alternation grouped first ("^a|b$" gives "^(?:a|b)$").
func anchoredForm(p string, re *syntax.Regexp) string {
	p = strings.TrimPrefix(p, "^")
	if strings.HasSuffix(p, "$") && !strings.HasSuffix(p, `\$`) {
		p = strings.TrimSuffix(p, "$")
	}
	if re.Op == syntax.OpAlternate {
		return "^(?:" + p + ")$"
	}
	return "^" + p + "$"
}
