package schema_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/validate"
)

// structural are the rules the published schema encodes in full: where Go
// reports one of them, the schema must reject the document too.
var structural = map[string]bool{
	"type": true, "unknown-member": true, "member-case": true, "required": true,
	"enum": true, "version": true, "manifest-id": true, "manifest-version": true,
	"manifest-connectors-unique": true, "step-id": true, "step-members": true,
	"tool-name": true, "allowed-tools-form": true, "secret-members": true,
}

// partial are rules the schema encodes only in part (a pattern, but not
// uniqueness or the cross-field half): a schema rejection may be explained
// by one of them.
var partial = map[string]bool{"mcp-server-name": true, "step-ref": true}

// reader rules concern bytes the schema's JSON parser cannot even see the
// same way (duplicates, comments, encodings, limits); cases with them are
// outside the comparison.
var reader = map[string]bool{
	"syntax": true, "duplicate-member": true, "invalid-utf8": true, "byte-order-mark": true,
	"comment": true, "trailing-comma": true, "trailing-data": true, "non-finite-number": true, "limit": true,
}

// TestSchemaAgreesWithRules: on every 1.6 document of the corpus and the
// examples, the published schema and the Go rules agree on the structural
// cases: Go structural error => schema rejects; Go clean => schema accepts;
// schema rejects => Go reports a structural (or partly structural) rule.
func TestSchemaAgreesWithRules(t *testing.T) {
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	f, err := os.Open("openplaybook-1.6.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jsonschema.UnmarshalJSON(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("openplaybook-1.6.schema.json", raw); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("openplaybook-1.6.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, p := range []string{"../examples/*.json", "../testdata/ok/*.json", "../testdata/err/*.json"} {
		m, _ := filepath.Glob(p)
		files = append(files, m...)
	}
	compared := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		doc, ds := playbook.Read(file, src, nil)
		ds = append(ds, validate.Document(doc, nil)...)
		if doc.OpenPlaybook == nil || doc.OpenPlaybook.Value != "1.6" || has(ds, reader) {
			continue
		}
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(src)))
		if err != nil {
			continue
		}
		compared++
		schemaErr := sch.Validate(inst)
		goStructural := has(ds, structural)
		switch {
		case goStructural && schemaErr == nil:
			t.Errorf("%s: Go reports a structural error the schema accepts:\n%s", file, list(ds))
		case len(ds) == 0 && schemaErr != nil:
			t.Errorf("%s: Go accepts, the schema rejects: %v", file, schemaErr)
		case schemaErr != nil && !goStructural && !has(ds, partial):
			t.Errorf("%s: the schema rejects (%v) but Go reports no structural rule:\n%s", file, schemaErr, list(ds))
		}
	}
	if compared < 40 {
		t.Errorf("compared only %d documents", compared)
	}
}

func has(ds []diag.Diagnostic, rules map[string]bool) bool {
	for _, d := range ds {
		if rules[d.Rule] && d.Severity == diag.Error {
			return true
		}
	}
	return false
}

func list(ds []diag.Diagnostic) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString("  " + d.Rule + ": " + d.Message + "\n")
	}
	return b.String()
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, os.ErrNotExist
}
