package drift

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
)

// TestStricterIsNeverAnError: a document that claims more than the
// registry (asks for approval, a higher riskClass, a side effect, more
// permissions or writes, an input schema that asks for more, an output
// schema ready for more) is never an error, one member at a time and all
// at once; the same member claimed less than the registry states is.
func TestStricterIsNeverAnError(t *testing.T) {
	// reg is a read tool whose registry states every member.
	reg := func() playbook.Definition {
		return playbook.Definition{
			Name:             "issue.get",
			Source:           "connector",
			Description:      "Get an issue.",
			Permissions:      []string{"issues:read"},
			InputSchema:      jsontext.Value(`{"type":"object","properties":{"number":{"type":"integer"}},"required":["number"]}`),
			OutputSchema:     jsontext.Value(`{"type":"object","properties":{"state":{"type":"string","enum":["open","closed"]}},"required":["state"]}`),
			DataScopeWrites:  []string{},
			RequiresApproval: ptr(false),
			RiskClass:        "internal",
			SideEffecting:    ptr(false),
			ConnectorType:    "github",
		}
	}
	stricter := []struct {
		name string
		edit func(d *playbook.Definition)
	}{
		{"requiresApproval true", func(d *playbook.Definition) { d.RequiresApproval = ptr(true) }},
		{"higher riskClass", func(d *playbook.Definition) { d.RiskClass = "money" }},
		{"sideEffecting true", func(d *playbook.Definition) { d.SideEffecting = ptr(true) }},
		{"more permissions", func(d *playbook.Definition) { d.Permissions = []string{"issues:read", "issues:write"} }},
		{"more writes", func(d *playbook.Definition) { d.DataScopeWrites = []string{"github.issues"} }},
		{"input schema asks for more", func(d *playbook.Definition) {
			d.InputSchema = jsontext.Value(`{"type":"object","properties":{"number":{"type":"integer","minimum":1}},"required":["number"]}`)
		}},
		{"output schema ready for more", func(d *playbook.Definition) {
			d.OutputSchema = jsontext.Value(`{"type":"object","properties":{"state":{"type":"string"}},"required":["state"]}`)
		}},
	}
	all := reg()
	for _, tc := range stricter {
		tc.edit(&all)
		doc := reg()
		tc.edit(&doc)
		for _, f := range Compare(doc, reg()) {
			if f.Severity == diag.Error {
				t.Errorf("%s: a stricter document is refused: %s", tc.name, f)
			}
		}
	}
	for _, f := range Compare(all, reg()) {
		if f.Severity == diag.Error {
			t.Errorf("all stricter at once: a stricter document is refused: %s", f)
		}
	}

	// Turned round (the registry claims the more), each is understating.
	understating := []struct {
		name, rule string
		edit       func(d *playbook.Definition)
	}{
		{"requiresApproval true", "drift-requires-approval", func(d *playbook.Definition) { d.RequiresApproval = ptr(true) }},
		{"higher riskClass", "drift-risk-class", func(d *playbook.Definition) { d.RiskClass = "money" }},
		{"sideEffecting true", "drift-side-effecting", func(d *playbook.Definition) { d.SideEffecting = ptr(true) }},
		{"more permissions", "drift-permissions", func(d *playbook.Definition) { d.Permissions = []string{"issues:read", "issues:write"} }},
		{"more writes", "drift-data-scope-writes", func(d *playbook.Definition) { d.DataScopeWrites = []string{"github.issues"} }},
	}
	for _, tc := range understating {
		r := reg()
		tc.edit(&r)
		for _, doc := range []playbook.Definition{reg(), func() playbook.Definition { d := reg(); d.RequiresApproval = nil; return d }()} {
			if tc.rule != "drift-requires-approval" && doc.RequiresApproval == nil {
				continue
			}
			found := false
			for _, f := range Compare(doc, r) {
				if f.Rule == tc.rule && f.Severity == diag.Error {
					found = true
				}
			}
			if !found {
				t.Errorf("%s in the registry only (document requiresApproval %v): no %s error; got %v", tc.name, boolOrAbsent(doc.RequiresApproval), tc.rule, Compare(doc, r))
			}
		}
	}
}
