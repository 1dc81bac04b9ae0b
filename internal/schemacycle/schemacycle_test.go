package schemacycle

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func compile(t *testing.T, src string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://t/s.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem://t/s.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func render(c []Step) string {
	var b strings.Builder
	for _, s := range c {
		b.WriteString(Pointer(s.From) + " " + s.Keyword + " -> " + Pointer(s.To) + "; ")
	}
	return b.String()
}

func TestFind(t *testing.T) {
	for _, c := range []struct{ schema, want string }{
		{`{"$ref": "#"}`, " $ref -> ; "},
		{`{"type": "object", "$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}}`,
			"/$defs/a $ref -> /$defs/b; /$defs/b allOf/0 -> /$defs/b/allOf/0; /$defs/b/allOf/0 $ref -> /$defs/a; "},
		{`{"properties": {"x": {"anyOf": [{"type": "string"}, {"$ref": "#/properties/x"}]}}}`,
			"/properties/x anyOf/1 -> /properties/x/anyOf/1; /properties/x/anyOf/1 $ref -> /properties/x; "},
		{`{"if": {"type": "object"}, "then": {"$ref": "#"}}`, " then -> /then; /then $ref -> ; "},
		{`{"$defs": {"unused": {"$ref": "#/$defs/unused"}}, "type": "object"}`, ""}, // never applied: the library does not compile it
		// Recursion that consumes input is fine.
		{`{"type": "object", "properties": {"child": {"$ref": "#"}}}`, ""},
		{`{"$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"}`, ""},
		{`{"allOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/a"}], "$defs": {"a": {"type": "string"}}}`, ""},
	} {
		if got := render(Find(compile(t, c.schema))); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.schema, got, c.want)
		}
	}
}

// TestLibraryLoops documents why Find exists: the library compiles a
// looping schema and reports the cycle only when validating.
func TestLibraryLoops(t *testing.T) {
	s := compile(t, `{"$ref": "#"}`)
	err := s.Validate(map[string]any{})
	if err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("want a reference cycle error from Validate, got %v", err)
	}
}
