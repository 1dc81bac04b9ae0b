package runtime

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
)

// importOne imports a document of one agent step "work" allowing one
// primitive read tool "records.get" with the given input schema, against
// a registry that holds the same definition. Validation is not run: Import
// must stand on its own.
func importOne(t *testing.T, inputSchema string) (*Imported, error) {
	t.Helper()
	f := false
	def := playbook.Definition{
		Name: "records.get", Source: "primitive", Description: "Reads a record.",
		Permissions: []string{"records:read"}, InputSchema: jsontext.Value(inputSchema),
		OutputSchema:       jsontext.Value(`{"type": "object"}`),
		DataScopeResources: []string{"records"}, RequiresApproval: &f, RiskClass: "read", SideEffecting: &f,
	}
	tools, err := json.Marshal([]playbook.Definition{def})
	if err != nil {
		t.Fatal(err)
	}
	src := fmt.Appendf(nil, `{"openplaybook": "1.6",
 "manifest": {"id": "one", "name": "One tool", "version": "1.0.0", "description": "Calls one tool.", "requiredConnectors": []},
 "requires": {"connections": [], "mcpServers": [], "secrets": []},
 "tools": %s,
 "steps": [{"id": "work", "kind": "agent", "agent": "a", "purpose": "Call the tool.", "allowedTools": ["records.get"]}]}`, tools)
	doc, _ := playbook.Read("one.json", src, nil)
	reg := registry.New()
	if err := reg.Add(def, registry.Origin{Kind: registry.Builtin}, nil); err != nil {
		t.Fatal(err)
	}
	return Import(doc, reg)
}

// TestDecideArguments: undeclared arguments are refused unless the schema
// allows them explicitly, and formats are assertions.
func TestDecideArguments(t *testing.T) {
	const customer = `{"type": "object", "properties": {"customerId": {"type": "string"}}, "required": ["customerId"]}`
	for _, c := range []struct {
		name, schema, args string
		refused            string // a part of the reason, or "" for allowed
	}{
		{"declared", customer, `{"customerId":"c1"}`, ""},
		{"extra", customer, `{"customerId":"c1","extra":1}`, `argument "extra" is not declared`},
		{"two extras", customer, `{"customerId":"c1","b":1,"a":2}`, `arguments "a", "b" are not declared`},
		{"explicitly open", `{"type": "object", "properties": {"customerId": {"type": "string"}}, "additionalProperties": true}`, `{"customerId":"c1","extra":1}`, ""},
		{"open by schema", `{"type": "object", "properties": {"customerId": {"type": "string"}}, "additionalProperties": {"type": "integer"}}`, `{"customerId":"c1","extra":1}`, ""},
		{"pattern properties", `{"type": "object", "patternProperties": {"^x-": {}}}`, `{"x-a":1}`, ""},
		{"explicitly closed", `{"type": "object", "properties": {"customerId": {"type": "string"}}, "additionalProperties": false}`, `{"customerId":"c1","extra":1}`, `argument "extra" is not declared (the inputSchema declares "customerId")`},
		{"type object declares none", `{"type": "object"}`, `{"id":"rec_1"}`, `argument "id" is not declared (the inputSchema declares no arguments)`},
		{"type object, no arguments", `{"type": "object"}`, `{}`, ""},
		{"top-level $ref", `{"$ref": "#/$defs/args", "$defs": {"args": {"type": "object", "properties": {"customerId": {"type": "string"}}}}}`, `{"customerId":"c1"}`, ""},
		{"top-level $ref, extra", `{"$ref": "#/$defs/args", "$defs": {"args": {"type": "object", "properties": {"customerId": {"type": "string"}}}}}`, `{"customerId":"c1","extra":1}`, `argument "extra" is not declared`},
		{"allOf", `{"type": "object", "allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]}`, `{"a":1,"b":2}`, ""},
		{"allOf, extra", `{"type": "object", "allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]}`, `{"a":1,"c":2}`, `argument "c" is not declared`},
		{"draft-07", `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {"$ref": "#/definitions/s"}}, "definitions": {"s": {"type": "string"}}}`, `{"a":"x"}`, ""},
		{"draft-07, extra", `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {"$ref": "#/definitions/s"}}, "definitions": {"s": {"type": "string"}}}`, `{"a":"x","b":1}`, `argument "b" is not declared`},
		{"email", `{"type": "object", "properties": {"to": {"type": "string", "format": "email"}}}`, `{"to":"not-an-email"}`, "is not valid email"},
		{"email ok", `{"type": "object", "properties": {"to": {"type": "string", "format": "email"}}}`, `{"to":"ops@example.com"}`, ""},
		{"date-time", `{"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}}`, `{"at":"yesterday"}`, "is not valid date-time"},
		{"uuid", `{"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}}}`, `{"id":"1234"}`, "is not valid uuid"},
		{"uri", `{"type": "object", "properties": {"u": {"type": "string", "format": "uri"}}}`, `{"u":"no scheme"}`, "is not valid uri"},
		{"unknown format", `{"type": "object", "properties": {"u": {"type": "string", "format": "x-custom"}}}`, `{"u":"anything"}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			im, err := importOne(t, c.schema)
			if err != nil {
				t.Fatal(err)
			}
			d := im.Decide("work", "records.get", []byte(c.args))
			switch {
			case c.refused == "" && !d.Allowed:
				t.Errorf("refused (%s): %s", d.Code, d.Reason)
			case c.refused != "" && (d.Allowed || d.Code != CodeInvalidArguments):
				t.Errorf("got allowed=%v code %q, want refused with %s", d.Allowed, d.Code, CodeInvalidArguments)
			case c.refused != "" && !strings.Contains(d.Reason, c.refused):
				t.Errorf("reason %q does not say %q", d.Reason, c.refused)
			}
		})
	}
}

// TestImportRefCycle: a schema whose references loop without reading any
// of the value is refused at Import, naming the tool and the pointers,
// rather than refusing every call.
func TestImportRefCycle(t *testing.T) {
	for _, c := range []struct{ schema, want string }{
		{`{"$ref": "#"}`, `"#" $ref → "#"`},
		{`{"type": "object", "$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}}`,
			`"#/$defs/a" $ref → "#/$defs/b" allOf/0 → "#/$defs/b/allOf/0" $ref → "#/$defs/a"`},
	} {
		_, err := importOne(t, c.schema)
		if err == nil {
			t.Errorf("%s: imported", c.schema)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, `tool "records.get"`) || !strings.Contains(msg, c.want) {
			t.Errorf("%s: error %q does not name the tool and %s", c.schema, msg, c.want)
		}
	}
	// Recursion through properties reads the value: it is fine.
	if _, err := importOne(t, `{"type": "object", "properties": {"child": {"$ref": "#"}}}`); err != nil {
		t.Errorf("recursive schema refused: %v", err)
	}
}

// TestDecideUnembedded: a name on the step's list that the document does
// not define is refused as unresolved, saying the definition is missing
// (check and run refuse such a document before; an Imported built directly
// still says why), and a defined name the registry lacks says that.
func TestDecideUnembedded(t *testing.T) {
	src := []byte(`{"openplaybook": "1.6",
 "manifest": {"id": "two", "name": "Two", "version": "1.0.0", "description": "d", "requiredConnectors": []},
 "requires": {"connections": [], "mcpServers": [], "secrets": []},
 "tools": [{"name": "records.get", "source": "primitive", "description": "d", "permissions": [],
   "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}, "riskClass": "read", "sideEffecting": false}],
 "steps": [{"id": "work", "kind": "agent", "agent": "a", "purpose": "p", "allowedTools": ["records.get", "customer.get"]}]}`)
	doc, _ := playbook.Read("two.json", src, nil)
	f := false
	reg := registry.New()
	if err := reg.Add(playbook.Definition{Name: "customer.get", Source: "primitive", SideEffecting: &f}, registry.Origin{Kind: registry.Builtin}, nil); err != nil {
		t.Fatal(err)
	}
	im, err := Import(doc, reg)
	if err != nil {
		t.Fatal(err)
	}
	d := im.Decide("work", "customer.get", []byte(`{}`))
	if d.Allowed || d.Code != CodeUnresolved || !strings.Contains(d.Reason, `no embedded definition in the document's "tools"`) {
		t.Errorf("a registry tool the document does not define: %+v", d)
	}
	d = im.Decide("work", "records.get", []byte(`{}`))
	if d.Allowed || d.Code != CodeUnresolved || !strings.Contains(d.Reason, "does not resolve in this runtime's registry") {
		t.Errorf("a defined tool the registry lacks: %+v", d)
	}
}
