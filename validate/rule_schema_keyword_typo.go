package validate

import (
	"strings"
	"unicode/utf8"

	"github.com/openplaybook/openplaybook/internal/suggest"
	"github.com/openplaybook/openplaybook/syntax"
)

// ruleSchemaKeywordTypo warns about a member of a schema object that is no
// JSON Schema keyword but is close to one: it differs only by case
// ("additionalproperties", "maxlength") or is a small edit away
// ("requird"). A validator ignores members it does not know, so the
// keyword meant constrains nothing, silently. Only schema positions are
// looked at (see walkSchema): the names under "properties" and the values
// of "const", "enum", "default" and "examples" are data. A member far from
// every keyword (an extension such as "x-order") is left alone; so are
// edits to names shorter than four characters, which are close to too
// much.
type ruleSchemaKeywordTypo struct{}

func (ruleSchemaKeywordTypo) Name() string { return "schema-keyword-typo" }
func (ruleSchemaKeywordTypo) Description() string {
	return "a member of a schema object that is not a JSON Schema keyword is not a misspelling of one"
}

// schemaVocabulary is every keyword of draft 2020-12 (core, applicator,
// unevaluated, validation, format, content and meta-data vocabularies),
// with those of draft-04 to 2019-09 the library still reads.
var schemaVocabulary = []string{
	"$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary", "$comment", "$defs",
	"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas",
	"prefixItems", "items", "contains", "properties", "patternProperties", "additionalProperties", "propertyNames",
	"unevaluatedItems", "unevaluatedProperties",
	"type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
	"maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains",
	"maxProperties", "minProperties", "required", "dependentRequired",
	"format", "contentEncoding", "contentMediaType", "contentSchema",
	"title", "description", "default", "deprecated", "readOnly", "writeOnly", "examples",
	// earlier drafts
	"id", "definitions", "dependencies", "additionalItems", "$recursiveRef", "$recursiveAnchor",
}

var knownKeyword = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range schemaVocabulary {
		m[k] = true
	}
	return m
}()

func (ruleSchemaKeywordTypo) Check(c *Context) {
	for _, s := range c.embedded() {
		walkSchema(s.n, func(n *syntax.Node) {
			for name := range n.Members() {
				if knownKeyword[name] {
					continue
				}
				if want := keywordFor(name); want != "" {
					c.WarnAtName(n, name, "%q in %s is not a JSON Schema keyword (did you mean %q?); a validator ignores members it does not know, so it constrains nothing",
						name, s.label(), want)
				}
			}
		})
	}
}

// keywordFor returns the keyword name is a misspelling of, or "".
func keywordFor(name string) string {
	for _, k := range schemaVocabulary {
		if strings.EqualFold(k, name) {
			return k
		}
	}
	if utf8.RuneCountInString(strings.TrimPrefix(name, "$")) < 4 || strings.HasPrefix(name, "x-") {
		return ""
	}
	k, _ := suggest.Closest(name, schemaVocabulary)
	return k
}
