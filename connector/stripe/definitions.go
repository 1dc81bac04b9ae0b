package stripe

import (
	_ "embed"
	"fmt"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/openplaybook/openplaybook/playbook"
)

// toolsJSON holds the connector's tool definitions in the spec's shape
// ("Embedded tool definitions"). They are the definitions the bundled
// examples embed, member for member; a test keeps the two equal, so that
// `openplaybook check` reports no drift on those examples.
//
//go:embed tools.json
var toolsJSON []byte

// Definitions returns the definitions of the connector's tools, in a fixed
// order: charge.history, invoice.list, billing_customer.get, charge.get (reads:
// riskClass "read", sideEffecting false) and charge.refund (riskClass
// "money", sideEffecting true, requiresApproval true, dataScopeWrites
// ["stripe.refunds"]). Every definition has source "connector" and
// connectorType [Provider].
//
// Schemas are compact JSON text in the member order of the definitions
// (no insignificant whitespace). Each call returns fresh values the caller
// may modify.
func Definitions() []playbook.Definition {
	defs, err := parseDefinitions(toolsJSON)
	if err != nil {
		// tools.json is compiled in and tested; this is a build defect,
		// never a user input.
		panic(fmt.Sprintf("connector/stripe: embedded tools.json: %v", err))
	}
	return defs
}

func parseDefinitions(src []byte) ([]playbook.Definition, error) {
	var defs []playbook.Definition
	if err := json.Unmarshal(src, &defs, json.RejectUnknownMembers(true)); err != nil {
		return nil, err
	}
	for i := range defs {
		d := &defs[i]
		for _, v := range []*jsontext.Value{&d.InputSchema, &d.OutputSchema, &d.HarnessInputSchema, &d.HarnessOutputSchema} {
			if *v == nil {
				continue
			}
			*v = v.Clone()
			if err := v.Compact(); err != nil {
				return nil, fmt.Errorf("tool %q: %v", d.Name, err)
			}
		}
	}
	return defs, nil
}

// writes says which tools are side-effecting (a write operation in
// Stripe's rate limits); built on first use, not at start-up (every
// command links this package, validate too).
var writes = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, d := range Definitions() {
		m[d.Name] = d.SideEffecting != nil && *d.SideEffecting
	}
	return m
})
