package validate

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/internal/testgen"
	"github.com/openplaybook/openplaybook/playbook"
)

// BenchmarkJSONSchema compiles 5,000 typical small tool schemas (about
// 1 KB each, all different) with a fresh compiler each, as the rule does.
func BenchmarkJSONSchema(b *testing.B) {
	var schemas []any
	for i := range 5000 {
		src := fmt.Sprintf(`{"type": "object", "properties": {"id%d": {"type": "string", "description": "Record id.", "pattern": "^rec_[A-Za-z0-9]+$"}, "limit": {"type": "integer", "minimum": 1, "maximum": %d}, "cursor": {"type": "string"}, "expand": {"type": "array", "items": {"type": "string", "enum": ["owner", "history", "notes"]}}}, "required": ["id%d"], "additionalProperties": false}`, i, 100+i, i)
		doc, _ := playbook.Read("s.json", []byte(`{"inputSchema": `+src+`}`), nil)
		schemas = append(schemas, doc.InputSchema.Value())
	}
	b.ResetTimer()
	for b.Loop() {
		for _, v := range schemas {
			if err := compileSchema(v); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkJSONSchemaRule runs the rule alone over the generated 5 MB,
// 5,000-tool document (10,001 schemas).
func BenchmarkJSONSchemaRule(b *testing.B) {
	doc, _ := playbook.Read("large.json", testgen.Large(1000, 5000), nil)
	for b.Loop() {
		c := &Context{Doc: doc, Opts: &Options{}, rule: "json-schema"}
		ruleJSONSchema{}.Check(c)
		if len(c.diags) > 0 {
			b.Fatal(c.diags[0].Message)
		}
	}
}

// r2SchemaDiags validates r2MinimalDoc with the tool's inputSchema
// replaced by schema and returns the json-schema rule's diagnostics.
func r2SchemaDiags(t *testing.T, schema string) []diag.Diagnostic {
	t.Helper()
	src := strings.Replace(r2MinimalDoc, `"inputSchema": {"type": "object", "properties": {}}`, `"inputSchema": `+schema, 1)
	var out []diag.Diagnostic
	for _, d := range r2Validate(t, src) {
		if d.Rule == "json-schema" {
			out = append(out, d)
		}
	}
	return out
}

func TestJSONSchemaCompiles(t *testing.T) {
	for _, tc := range []struct {
		schema, pointer, msg string // msg: a substring of the message; "" for valid
	}{
		{`{"type": "object", "properties": {"x": {"type": "string"}}}`, "", ""},
		{`true`, "", ""},
		{`{"$defs": {"id": {"type": "string"}}, "type": "object", "properties": {"x": {"$ref": "#/$defs/id"}}}`, "", ""},
		{`{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"id": {"type": "string"}}, "type": "object", "properties": {"x": {"$ref": "#/definitions/id"}}}`, "", ""},
		{`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"n": {"type": "number", "exclusiveMinimum": 0}}}`, "", ""},
		{`{"type": "object", "properties": {"x": {"type": "strin"}}}`, "/tools/0/inputSchema/properties/x/type", `(draft 2020-12) is not a valid JSON Schema: "type": value must be one of`},
		{`{"type": "object", "properties": {"x": {"type": "string", "pattern": "[a-z"}}}`, "/tools/0/inputSchema/properties/x/pattern", "is not valid regex"},
		{`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"n": {"exclusiveMinimum": true}}}`, "/tools/0/inputSchema/properties/n/exclusiveMinimum", `(draft-07) is not a valid JSON Schema: "exclusiveMinimum": got boolean, want number`},
		{`{"$ref": "https://evil.example/x.json"}`, "/tools/0/inputSchema/$ref", `"$ref" "https://evil.example/x.json" is outside the schema: remote and file references are not fetched`},
		{`{"type": "object", "properties": {"x": {"$ref": "other.json#/a"}}}`, "/tools/0/inputSchema/properties/x/$ref", `remote and file references are not fetched`},
		{`{"$ref": "#/$defs/missing"}`, "/tools/0/inputSchema/$ref", `"$ref" "#/$defs/missing" points at nothing in the schema`},
		{`{"$schema": "http://json-schema.org/draft-03/schema#"}`, "/tools/0/inputSchema/$schema", `names no draft this runtime knows`},
		{`{"$ref": "https://user:` + "hunter2hunter2" + `@evil.example/x.json"}`, "/tools/0/inputSchema/$ref", `(not shown: it looks like a credential)`},
	} {
		ds := r2SchemaDiags(t, tc.schema)
		if tc.msg == "" {
			if len(ds) > 0 {
				t.Errorf("%s: want no json-schema diagnostic, got %s", tc.schema, ds[0].Message)
			}
			continue
		}
		if len(ds) != 1 {
			t.Errorf("%s: got %d json-schema diagnostics, want 1: %v", tc.schema, len(ds), ds)
			continue
		}
		if ds[0].Pointer != tc.pointer || !strings.Contains(ds[0].Message, tc.msg) || ds[0].Severity != diag.Error {
			t.Errorf("%s:\ngot  %s %s\nwant %s ...%s...", tc.schema, ds[0].Pointer, ds[0].Message, tc.pointer, tc.msg)
		}
		if strings.Contains(ds[0].Message, "hunter2") {
			t.Errorf("message echoes a credential: %s", ds[0].Message)
		}
	}
}

// TestJSONSchemaNeverLoads: a file reference to a file that exists, and
// holds a valid schema, is still refused; so is a $schema naming it. If
// the compiler read the file, the schema would compile.
func TestJSONSchemaNeverLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "string.json")
	if err := os.WriteFile(path, []byte(`{"type": "string"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	u := (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String()
	for _, schema := range []string{
		`{"$ref": "` + u + `"}`,
		`{"type": "object", "properties": {"x": {"$ref": "` + u + `"}}}`,
		`{"$schema": "` + u + `"}`,
	} {
		ds := r2SchemaDiags(t, schema)
		if len(ds) != 1 || !strings.Contains(ds[0].Message, "not fetched") {
			t.Errorf("%s: want one error saying the reference is not fetched, got %v", schema, ds)
		}
	}
	// The loader itself refuses everything, whatever the scheme.
	for _, u := range []string{u, "https://example.com/s.json", "http://127.0.0.1/", "urn:x"} {
		if _, err := (refuseLoader{}).Load(u); !errors.Is(err, errNotFetched) {
			t.Errorf("Load(%q) = %v, want errNotFetched", u, err)
		}
	}
}

// TestJSONSchemaDeduplicates: identical schemas are compiled once, and
// each copy's error is located in that copy.
func TestJSONSchemaDeduplicates(t *testing.T) {
	bad := `{"type": "object", "properties": {"x": {"type": "strin"}}}`
	var tools []string
	for i := range 20 {
		tools = append(tools, fmt.Sprintf(`{"name": "t.n%d", "source": "primitive", "description": "d", "permissions": [], "inputSchema": %s, "outputSchema": {"type": "object"}}`, i, bad))
	}
	src := `{"openplaybook": "1.6", "tools": [` + strings.Join(tools, ",") + `]}`
	doc, _ := playbook.Read("d.json", []byte(src), nil)
	c := &Context{Doc: doc, Opts: &Options{}, rule: "json-schema"}
	ruleJSONSchema{}.Check(c)
	if len(c.diags) != 20 {
		t.Fatalf("got %d diagnostics, want 20", len(c.diags))
	}
	for i, d := range c.diags {
		if want := fmt.Sprintf("/tools/%d/inputSchema/properties/x/type", i); d.Pointer != want {
			t.Errorf("diagnostic %d at %s, want %s", i, d.Pointer, want)
		}
	}
	var dd schemaDedup
	for _, t := range doc.Tools {
		dd.add(t.InputSchema)
		dd.add(t.OutputSchema)
	}
	if len(dd.uniq) != 2 {
		t.Errorf("got %d distinct schemas, want 2", len(dd.uniq))
	}
}

// TestSchemaDedupManyOfOneLength: past dedupLinear distinct schemas of one
// source length, a bucket is indexed by hash and stays exact.
func TestSchemaDedupManyOfOneLength(t *testing.T) {
	var parts []string
	for i := range 50 {
		parts = append(parts, fmt.Sprintf(`{"maximum": %d}`, i+10), fmt.Sprintf(`{"maximum": %d}`, i+10))
	}
	doc, _ := playbook.Read("d.json", []byte(`{"x": [`+strings.Join(parts, ",")+`]}`), nil)
	var dd schemaDedup
	arr := doc.Root.Member("x")
	for i, e := range arr.Elems() {
		u := dd.add(e)
		if i%2 == 1 && u.n != arr.Child(i-1) {
			t.Fatalf("element %d not matched with its twin", i)
		}
	}
	if len(dd.uniq) != 50 {
		t.Errorf("got %d distinct schemas, want 50", len(dd.uniq))
	}
}

func TestJSONSchemaInputNotObject(t *testing.T) {
	src := strings.Replace(r2MinimalDoc, `"inputSchema": {"type": "object", "properties": {}}`, `"inputSchema": {"type": "string"}`, 1)
	var got []diag.Diagnostic
	for _, d := range r2Validate(t, src) {
		if d.Rule == "json-schema" {
			got = append(got, d)
		}
	}
	if len(got) != 1 || got[0].Severity != diag.Warning || got[0].Pointer != "/tools/0/inputSchema/type" {
		t.Errorf("want one warning at /tools/0/inputSchema/type, got %v", got)
	}
}

// TestJSONSchemaWorkerPanic: a panic while compiling (a library bug) is
// reported by Document as an internal diagnostic naming the rule, as a
// panic on the rule's own goroutine would be, and does not crash.
func TestJSONSchemaWorkerPanic(t *testing.T) {
	defer func(f func(any) error) { compileFunc = f }(compileFunc)
	compileFunc = func(any) error { panic("boom") }
	var tools []string
	for i := range 10 { // distinct schemas, so that several workers run
		tools = append(tools, fmt.Sprintf(`{"name": "t.n%d", "source": "primitive", "description": "d", "permissions": [], "inputSchema": {"maxProperties": %d}, "outputSchema": {"minProperties": %d}}`, i, i, i))
	}
	for _, src := range []string{r2MinimalDoc, `{"openplaybook": "1.6", "tools": [` + strings.Join(tools, ",") + `]}`} {
		doc, _ := playbook.Read("p.json", []byte(src), nil)
		var internal []diag.Diagnostic
		for _, d := range Document(doc, nil) {
			if d.Rule == "internal" {
				internal = append(internal, d)
			}
		}
		if len(internal) != 1 || !strings.Contains(internal[0].Message, `rule "json-schema" failed: boom`) {
			t.Errorf("want one internal diagnostic for json-schema, got %v", internal)
		}
	}
}
