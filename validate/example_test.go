package validate_test

import (
	"fmt"

	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/validate"
)

// Document runs every rule on a document that playbook.Read has read;
// each diagnostic has its position and JSON Pointer.
func ExampleDocument() {
	src := []byte(`{
  "openplaybook": "1.6",
  "manifest": {"id": "triage", "name": "Triage", "version": "1.0.0", "description": "Triage a ticket.", "requiredConnectors": []},
  "requires": {"connections": [], "mcpServers": [], "secrets": []},
  "tools": [],
  "steps": [{"id": "look", "kind": "agent", "agent": "rita", "purpose": "Look the customer up.", "allowedTools": ["mcp.*"]}]
}`)
	doc, ds := playbook.Read("triage.json", src, nil)
	ds = append(ds, validate.Document(doc, nil)...)
	for _, d := range ds {
		fmt.Printf("%s:%d:%d: %s %s [%s]\n", d.File, d.Line, d.Column, d.Pointer, d.Severity, d.Rule)
	}
	// Output:
	// triage.json:6:115: /steps/0/allowedTools/0 error [allowed-tools-form]
}
