package builtin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/validate"

	"github.com/go-json-experiment/json"
)

// TestCatalogIsValidAsEmbedded wraps the catalog in a document and runs the
// validator over it: every definition must pass every tool rule.
func TestCatalogIsValidAsEmbedded(t *testing.T) {
	defs := Definitions()
	if len(defs) != 5 {
		t.Fatalf("catalog has %d tools, want 5", len(defs))
	}
	var names []string
	for _, d := range defs {
		if d.Source != "primitive" {
			t.Errorf("%s: source %q, want primitive", d.Name, d.Source)
		}
		names = append(names, d.Name)
	}
	doc := map[string]any{
		"openplaybook": "1.6",
		"manifest":     map[string]any{"id": "catalog", "name": "c", "version": "1.0.0", "description": "d", "requiredConnectors": []string{}},
		"requires":     map[string]any{"connections": []any{}, "mcpServers": []any{}, "secrets": []any{}},
		"tools":        defs,
		"steps":        []any{map[string]any{"id": "s", "kind": "agent", "agent": "a", "purpose": "p", "allowedTools": names}},
	}
	src, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	d, ds := playbook.Read("catalog.json", src, nil)
	ds = append(ds, validate.Document(d, nil)...)
	for _, x := range ds {
		if x.Severity >= diag.Warning {
			t.Errorf("%s: %s [%s]", x.Pointer, x.Message, x.Rule)
		}
	}
}

// TestExamplesEmbedTheCatalog: every bundled example embeds the built-ins
// exactly as the catalog defines them, so check reports no drift.
func TestExamplesEmbedTheCatalog(t *testing.T) {
	cat := map[string]playbook.Definition{}
	for _, d := range Definitions() {
		cat[d.Name] = d
	}
	files, _ := filepath.Glob("../examples/*.json")
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := playbook.Read(f, src, nil)
		for _, tool := range doc.Tools {
			if playbook.Str(tool.Source) != "primitive" {
				continue
			}
			want, ok := cat[playbook.Str(tool.Name)]
			if !ok {
				t.Errorf("%s: built-in %q is not in the catalog", f, playbook.Str(tool.Name))
				continue
			}
			got := tool.Definition(src)
			if !sameJSON(t, got, want) {
				t.Errorf("%s: embedded %q differs from the catalog", f, want.Name)
			}
		}
	}
}

func sameJSON(t *testing.T, a, b playbook.Definition) bool {
	ja, err1 := json.Marshal(a, json.Deterministic(true))
	jb, err2 := json.Marshal(b, json.Deterministic(true))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	var va, vb any
	json.Unmarshal(ja, &va)
	json.Unmarshal(jb, &vb)
	ca, _ := json.Marshal(va, json.Deterministic(true))
	cb, _ := json.Marshal(vb, json.Deterministic(true))
	return string(ca) == string(cb)
}
