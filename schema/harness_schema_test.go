package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/harness"
)

// The harness file's schema (harness.schema.json) is what editors show
// while someone writes a harness: each property says what it is for, and
// what it defaults to and an example where that helps.

const harnessSchemaID = "https://openplaybook.dev/schema/harness.schema.json"

func readHarnessSchema(t *testing.T) map[string]any {
	t.Helper()
	src, err := os.ReadFile("harness.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(src, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHarnessPropertiesDescribed: every property the harness schema
// defines has a "description", and so has every definition of $defs. A
// property without one is allowed only where it defines nothing: a
// constraint on a member described at the same place (in an if, then,
// else, not, allOf, anyOf or oneOf, or through an allOf $ref), or a
// presence test ({"properties": {"url": true}, "required": ["url"]}, as
// Ajv's strict mode wants).
func TestHarnessPropertiesDescribed(t *testing.T) {
	s := readHarnessSchema(t)
	defs, _ := s["$defs"].(map[string]any)
	for name, d := range defs {
		if m, ok := d.(map[string]any); !ok || m["description"] == nil {
			t.Errorf("$defs/%s has no description", name)
		}
	}
	// describes reports whether sch, or a definition it includes with an
	// allOf $ref, describes property name.
	var describes func(sch map[string]any, name string, depth int) bool
	describes = func(sch map[string]any, name string, depth int) bool {
		if p, ok := sch["properties"].(map[string]any); ok {
			if v, ok := p[name].(map[string]any); ok && v["description"] != nil {
				return true
			}
		}
		for _, a := range asList(sch["allOf"]) {
			ref, _ := asMap(a)["$ref"].(string)
			if d := asMap(defs[strings.TrimPrefix(ref, "#/$defs/")]); ref != "" && d != nil && depth < 8 && describes(d, name, depth+1) {
				return true
			}
		}
		return false
	}
	checked := 0
	// chain are the schemas that apply at the same place in the instance
	// as sch, outermost first (sch's applicator ancestors).
	var walk func(v any, path string, chain []map[string]any)
	walk = func(v any, path string, chain []map[string]any) {
		sch := asMap(v)
		if sch == nil {
			return
		}
		here := append(slices.Clone(chain), sch)
		props := asMap(sch["properties"])
		for _, name := range sortedKeys(props) {
			p := props[name]
			where := path + "/properties/" + name
			checked++
			switch {
			case asMap(p) != nil && asMap(p)["description"] != nil:
			case p == true && slices.Contains(asList(sch["required"]), any(name)):
			case slices.ContainsFunc(here, func(s map[string]any) bool { return describes(s, name, 0) }):
			default:
				t.Errorf("%s has no description", where)
			}
			walk(p, where, nil)
		}
		for _, k := range []string{"if", "then", "else", "not"} {
			walk(sch[k], path+"/"+k, here)
		}
		for _, k := range []string{"allOf", "anyOf", "oneOf"} {
			for i, c := range asList(sch[k]) {
				walk(c, fmt.Sprintf("%s/%s/%d", path, k, i), here)
			}
		}
		for _, k := range []string{"additionalProperties", "items", "propertyNames"} {
			walk(sch[k], path+"/"+k, nil)
		}
		for _, name := range sortedKeys(asMap(sch["$defs"])) {
			walk(asMap(sch["$defs"])[name], path+"/$defs/"+name, nil)
		}
	}
	walk(s, "", nil)
	if checked < 60 {
		t.Errorf("only %d properties checked; the walk missed some", checked)
	}
}

// TestHarnessDefaultsAndExamples: every "default" and every "examples"
// value of the harness schema is valid against the schema it sits in, a
// harness's top-level sections have examples, and an example of a
// top-level section, as a harness file of its own, is one the harness
// reader accepts.
func TestHarnessDefaultsAndExamples(t *testing.T) {
	src, err := os.ReadFile("harness.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(harnessSchemaID, doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(v any, ptr string)
	walk = func(v any, ptr string) {
		switch x := v.(type) {
		case map[string]any:
			var values []any
			if d, ok := x["default"]; ok {
				values = append(values, d)
			}
			values = append(values, asList(x["examples"])...)
			if len(values) > 0 {
				sch, err := c.Compile(harnessSchemaID + "#" + ptr)
				if err != nil {
					t.Fatalf("compiling %s: %v", ptr, err)
				}
				for _, val := range values {
					n++
					if err := sch.Validate(val); err != nil {
						t.Errorf("%s: default or example %v is not valid against its schema: %v", ptr, val, err)
					}
				}
			}
			for _, k := range sortedKeys(x) {
				if k == "default" || k == "examples" || k == "const" || k == "enum" {
					continue
				}
				walk(x[k], ptr+"/"+escape(k))
			}
		case []any:
			for i, e := range x {
				walk(e, fmt.Sprintf("%s/%d", ptr, i))
			}
		}
	}
	walk(doc, "")
	if n < 30 {
		t.Errorf("only %d defaults and examples; want them where useful", n)
	}

	top := asMap(asMap(doc)["properties"])
	for _, section := range []string{"mcpServers", "agents"} {
		examples := asList(asMap(top[section])["examples"])
		if len(examples) == 0 {
			t.Errorf("top-level %q has no examples", section)
		}
		for _, ex := range examples {
			b, err := json.Marshal(map[string]any{section: ex})
			if err != nil {
				t.Fatal(err)
			}
			_, ds := harness.Parse("h.json", b, "/h")
			if diag.Count(ds, diag.Error) > 0 {
				t.Errorf("the %s example %s is refused by the harness reader: %v", section, b, ds)
			}
		}
	}
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }
func asList(v any) []any         { l, _ := v.([]any); return l }

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// escape escapes a JSON Pointer reference token (RFC 6901).
func escape(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }
