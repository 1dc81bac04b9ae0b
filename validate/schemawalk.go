package validate

import (
	"fmt"

	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/syntax"
)

// embeddedSchema is one JSON Schema a document embeds: the document's
// inputSchema, or a tool's inputSchema or outputSchema.
type embeddedSchema struct {
	n     *syntax.Node
	tool  *playbook.Tool // nil for the document's
	input bool           // a tool's inputSchema
}

// label names the schema in messages: `the document's "inputSchema"`,
// `"outputSchema" of tool "x"`. It is built only for a message: a large
// document has thousands of schemas and few messages.
func (s embeddedSchema) label() string {
	switch {
	case s.tool == nil:
		return fmt.Sprintf("the document's %q", "inputSchema")
	case s.input:
		return fmt.Sprintf("%q of %s", "inputSchema", toolLabel(s.tool))
	}
	return fmt.Sprintf("%q of %s", "outputSchema", toolLabel(s.tool))
}

// embeddedSchemas returns the schemas of doc, in document order (rules
// read them with [Context.embedded]).
func embeddedSchemas(d *playbook.Document) []embeddedSchema {
	n := 0
	if d.InputSchema != nil {
		n++
	}
	for _, t := range d.Tools {
		if t.InputSchema != nil {
			n++
		}
		if t.OutputSchema != nil {
			n++
		}
	}
	out := make([]embeddedSchema, 0, n)
	if d.InputSchema != nil {
		out = append(out, embeddedSchema{n: d.InputSchema})
	}
	for _, t := range d.Tools {
		if t.InputSchema != nil {
			out = append(out, embeddedSchema{n: t.InputSchema, tool: t, input: true})
		}
		if t.OutputSchema != nil {
			out = append(out, embeddedSchema{n: t.OutputSchema, tool: t})
		}
	}
	return out
}

// Keywords whose value is a schema, an array of schemas, or an object
// whose member values are schemas (draft 2020-12, with the draft-04 to
// 2019-09 ones the library also reads).
var (
	schemaKeywords = map[string]bool{
		"additionalProperties": true, "unevaluatedProperties": true, "propertyNames": true,
		"items": true, "additionalItems": true, "unevaluatedItems": true, "contains": true,
		"not": true, "if": true, "then": true, "else": true, "contentSchema": true,
	}
	schemaArrayKeywords = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true, "items": true}
	schemaMapKeywords   = map[string]bool{
		"properties": true, "patternProperties": true, "$defs": true, "definitions": true,
		"dependentSchemas": true, "dependencies": true,
	}
)

// walkSchema calls fn for root and for every subschema object below it
// that sits in a schema position: the values of the keywords above, never
// the names of "properties" nor the values of "const", "enum", "default"
// or "examples". A subschema that is not an object (true, false, or a
// mistake json-schema reports) is skipped.
func walkSchema(root *syntax.Node, fn func(s *syntax.Node)) {
	var walk func(s *syntax.Node)
	walk = func(s *syntax.Node) {
		if s == nil || s.Kind != syntax.Object {
			return
		}
		fn(s)
		for name, v := range s.Members() {
			switch {
			case v.Kind == syntax.Object && schemaKeywords[name]:
				walk(v)
			case v.Kind == syntax.Array && schemaArrayKeywords[name]:
				for _, e := range v.Elems() {
					walk(e)
				}
			case v.Kind == syntax.Object && schemaMapKeywords[name]:
				for _, sub := range v.Members() {
					walk(sub) // "dependencies" may also hold arrays of names: skipped
				}
			}
		}
	}
	walk(root)
}
