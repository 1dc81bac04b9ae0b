package validate

import (
	"github.com/openplaybook/openplaybook/syntax"
)

// ruleInputSchemaShape warns when a tool's inputSchema does not say what
// its arguments are: no "type" at all, or "type": "object" with no
// "properties". The runtime refuses arguments an inputSchema does not
// declare unless it allows them explicitly (docs/runtime.md, "Arguments"),
// so such a tool accepts only {}. A top-level "$ref", "allOf", "anyOf" or
// "oneOf" may carry the type and the properties, and
// "additionalProperties", "unevaluatedProperties" or "patternProperties"
// say what the arguments are: those are not reported. A "type" that
// leaves out "object" is json-schema's.
type ruleInputSchemaShape struct{}

func (ruleInputSchemaShape) Name() string { return "input-schema-shape" }
func (ruleInputSchemaShape) Description() string {
	return `a tool's inputSchema has a "type" and, for an object, "properties"`
}

func (ruleInputSchemaShape) Check(c *Context) {
	for _, s := range c.embedded() {
		if !s.input || s.n.Kind != syntax.Object || hasAny(s.n, "$ref", "allOf", "anyOf", "oneOf", "$dynamicRef", "$recursiveRef") {
			continue
		}
		typ := s.n.Member("type")
		switch {
		case typ == nil:
			c.Warnf(s.n, "%s has no %q; a tool's arguments are a JSON object, so write %s and describe the arguments in %q",
				s.label(), "type", `"type": "object"`, "properties")
		case isObjectType(typ) && !hasAny(s.n, "properties", "additionalProperties", "unevaluatedProperties", "patternProperties"):
			c.Warnf(typ, "%s is %s without %q, so it declares no arguments and the runtime refuses any; describe the arguments in %q (%s for a tool that takes none), or write %s to accept any",
				s.label(), `"type": "object"`, "properties", "properties", `"properties": {}`, `"additionalProperties": true`)
		}
	}
}

// hasAny reports whether object n has a member of one of the names.
func hasAny(n *syntax.Node, names ...string) bool {
	for _, name := range names {
		if n.Member(name) != nil {
			return true
		}
	}
	return false
}

// isObjectType reports whether a "type" value is or includes "object".
func isObjectType(typ *syntax.Node) bool {
	switch typ.Kind {
	case syntax.String:
		return typ.Text() == "object"
	case syntax.Array:
		for _, e := range typ.Elems() {
			if e.Kind == syntax.String && e.Text() == "object" {
				return true
			}
		}
	}
	return false
}
