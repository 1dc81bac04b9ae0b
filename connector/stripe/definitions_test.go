package stripe

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/openplaybook/openplaybook/playbook"
)

// compactOf returns v without insignificant whitespace (member order and
// number spelling kept), or nil for nil.
func compactOf(t *testing.T, v jsontext.Value) jsontext.Value {
	t.Helper()
	if v == nil {
		return nil
	}
	v = v.Clone()
	if err := v.Compact(); err != nil {
		t.Fatalf("compact %s: %v", v, err)
	}
	return v
}

func normalized(t *testing.T, d playbook.Definition) playbook.Definition {
	t.Helper()
	d.InputSchema = compactOf(t, d.InputSchema)
	d.OutputSchema = compactOf(t, d.OutputSchema)
	d.HarnessInputSchema = compactOf(t, d.HarnessInputSchema)
	d.HarnessOutputSchema = compactOf(t, d.HarnessOutputSchema)
	return d
}

// TestDefinitionsMatchExamples: every Stripe connector tool a bundled
// example embeds is defined here, identically (so `openplaybook check`
// reports no drift on the examples), and failed-charge-recovery embeds all
// five.
func TestDefinitionsMatchExamples(t *testing.T) {
	ours := map[string]playbook.Definition{}
	for _, d := range Definitions() {
		ours[d.Name] = d
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	seen := map[string]map[string]bool{}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := playbook.Read(file, src, nil)
		for _, tool := range doc.Tools {
			if playbook.Str(tool.ConnectorType) != Provider {
				continue
			}
			theirs := tool.Definition(src)
			if seen[file] == nil {
				seen[file] = map[string]bool{}
			}
			seen[file][theirs.Name] = true
			mine, ok := ours[theirs.Name]
			if !ok {
				t.Errorf("%s embeds Stripe tool %q, which the connector does not define", file, theirs.Name)
				continue
			}
			if got, want := normalized(t, mine), normalized(t, theirs); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: definition of %q differs:\n connector: %s\n example:   %s", file, theirs.Name, mustJSON(t, got), mustJSON(t, want))
			}
		}
	}
	fcr := filepath.Join("..", "..", "examples", "failed-charge-recovery.json")
	for name := range ours {
		if !seen[fcr][name] {
			t.Errorf("%s does not embed %q", fcr, name)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := jsonMarshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDefinitionsShape(t *testing.T) {
	defs := Definitions()
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
		if d.Source != "connector" || d.ConnectorType != Provider {
			t.Errorf("%q: source %q, connectorType %q", d.Name, d.Source, d.ConnectorType)
		}
		if d.SideEffecting == nil || d.RequiresApproval == nil {
			t.Errorf("%q: sideEffecting and requiresApproval must be explicit", d.Name)
			continue
		}
		switch d.RiskClass {
		case "read":
			if *d.SideEffecting || *d.RequiresApproval || len(d.DataScopeWrites) != 0 {
				t.Errorf("%q: a read tool declares side effects or approval", d.Name)
			}
		case "money":
			if !*d.SideEffecting || !*d.RequiresApproval || len(d.DataScopeWrites) == 0 {
				t.Errorf("%q: a money tool must be side-effecting, need approval and declare its writes", d.Name)
			}
		default:
			t.Errorf("%q: riskClass %q", d.Name, d.RiskClass)
		}
		for _, s := range []jsontext.Value{d.InputSchema, d.OutputSchema} {
			if !s.IsValid() || s.Kind() != '{' {
				t.Errorf("%q: schema is not a JSON object: %s", d.Name, s)
			}
			if c := compactOf(t, s); !bytes.Equal(c, s) {
				t.Errorf("%q: schema is not compact", d.Name)
			}
		}
	}
	want := []string{"charge.history", "invoice.list", "billing_customer.get", "charge.get", "charge.refund"}
	if !slices.Equal(names, want) {
		t.Errorf("Definitions() names = %q, want %q", names, want)
	}
	// Every definition has an implementation, and nothing more.
	impl := make([]string, 0, len(tools))
	for name := range tools {
		impl = append(impl, name)
	}
	slices.Sort(impl)
	slices.Sort(names)
	if !slices.Equal(impl, names) {
		t.Errorf("implemented tools %q, defined tools %q", impl, names)
	}
	refund := defs[4]
	if refund.RiskClass != "money" || !slices.Equal(refund.DataScopeWrites, []string{"stripe.refunds"}) {
		t.Errorf("charge.refund: riskClass %q, dataScopeWrites %q", refund.RiskClass, refund.DataScopeWrites)
	}
}

func TestDefinitionsAreFresh(t *testing.T) {
	a := Definitions()
	a[0].Name = "changed"
	a[0].Permissions[0] = "changed"
	a[0].InputSchema[0] = '['
	b := Definitions()
	if b[0].Name != "charge.history" || b[0].Permissions[0] != "charges:read" || b[0].InputSchema[0] != '{' {
		t.Errorf("a caller's changes leaked into the next Definitions(): %+v", b[0])
	}
}
