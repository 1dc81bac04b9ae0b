package explain

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/internal/credential"
	"github.com/openplaybook/openplaybook/internal/textsafe"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/syntax"
)

// Schema is a JSON Schema as JSON text, in one canonical form: compact
// (no insignificant blanks), with <, > and & escaped as \u003c, \u003e and
// \u0026 (as encoding/json writes every string), so that it encodes and
// decodes to itself. Nil encodes as null.
type Schema []byte

// MarshalJSON returns s, or null when s is nil.
func (s Schema) MarshalJSON() ([]byte, error) {
	if s == nil {
		return []byte("null"), nil
	}
	return s, nil
}

// UnmarshalJSON stores b in the canonical form; null is nil.
func (s *Schema) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*s = nil
		return nil
	}
	c, err := canonical(b)
	if err != nil {
		return err
	}
	*s = c
	return nil
}

// canonical returns JSON text b in [Schema]'s form.
func canonical(b []byte) (Schema, error) {
	var c, e bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return nil, err
	}
	json.HTMLEscape(&e, c.Bytes())
	return Schema(e.Bytes()), nil
}

// schemaText returns the schema as text to show: indented by two spaces
// when multiline, else compact; strings written with the fewest escapes
// (so "<" shows as "<", not \u003c), member order kept. Every line is
// passed through [textsafe.Escape], so no control or invisible formatting
// character is shown raw (what it produces is a JSON escape too).
func schemaText(s Schema, multiline bool) string {
	v := jsontext.Value(bytes.Clone(s))
	opts := []jsontext.Options{jsontext.PreserveRawStrings(false)}
	if multiline {
		opts = append(opts, jsontext.Multiline(true), jsontext.WithIndent("  "))
	}
	if err := v.Format(opts...); err != nil {
		v = jsontext.Value(s)
	}
	lines := strings.Split(string(v), "\n")
	for i, l := range lines {
		lines[i] = textsafe.Escape(l)
	}
	return strings.Join(lines, "\n")
}

// explainInput returns the document's inputSchema (nil when it has none,
// or the schema was cut off by a syntax error) and the top-level
// properties it declares.
func explainInput(doc *playbook.Document) (Schema, []InputField) {
	fields := []InputField{}
	n := doc.InputSchema
	if n == nil || n.Kind != syntax.Object {
		return nil, fields
	}
	var raw Schema
	if n.End > n.Offset && int(n.End) <= len(doc.Source) {
		raw, _ = canonical(doc.Source[n.Offset:n.End])
	}
	required := map[string]bool{}
	if r := n.Member("required"); r != nil && r.Kind == syntax.Array {
		for _, e := range r.Elems() {
			if e.Kind == syntax.String {
				required[e.Text()] = true
			}
		}
	}
	props := n.Member("properties")
	if props == nil || props.Kind != syntax.Object {
		return raw, fields
	}
	seen := map[string]bool{}
	for name, p := range props.Members() {
		if seen[name] {
			continue // a duplicate name: the reader's error
		}
		seen[name] = true
		f := InputField{Name: name, Required: required[name]}
		if p.Kind == syntax.Object {
			f.Type = schemaType(p)
			if d := p.Member("description"); d != nil && d.Kind == syntax.String {
				f.Description = d.Text()
			}
		}
		fields = append(fields, f)
	}
	return raw, fields
}

// schemaType renders a property schema's "type" (a name, or a list of
// names joined by " or ") with its "format" in parentheses.
func schemaType(p *syntax.Node) string {
	var names []string
	switch t := p.Member("type"); {
	case t == nil:
	case t.Kind == syntax.String:
		names = append(names, t.Text())
	case t.Kind == syntax.Array:
		for _, e := range t.Elems() {
			if e.Kind == syntax.String {
				names = append(names, e.Text())
			}
		}
	}
	s := strings.Join(names, " or ")
	if f := p.Member("format"); f != nil && f.Kind == syntax.String {
		if s == "" {
			s = "any"
		}
		s += " (" + f.Text() + ")"
	}
	return s
}

// redactJSON returns raw with every credential in its strings redacted
// ([credential.Redact]), still valid JSON. The text is redacted as it is
// when that keeps it valid (so the member order stays); otherwise it is
// decoded, each string (member names too) redacted, and encoded again.
func redactJSON(raw Schema) Schema {
	if raw == nil {
		return nil
	}
	s := credential.Redact(string(raw))
	if s == string(raw) {
		return raw
	}
	if c, err := canonical([]byte(s)); err == nil {
		return c
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	b, err := json.Marshal(redactValue(v))
	if err != nil {
		return nil
	}
	c, _ := canonical(b)
	return c
}

func redactValue(v any) any {
	switch x := v.(type) {
	case string:
		return credential.Redact(x)
	case []any:
		for i := range x {
			x[i] = redactValue(x[i])
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[credential.Redact(k)] = redactValue(e)
		}
		return out
	}
	return v
}
