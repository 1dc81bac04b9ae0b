// Package builtin holds the catalog of openplaybook's built-in tools: the
// plain-named tools over the runtime's own primitives (spec, "Built-in
// tools, plain names over the runtime's primitives: customer.get,
// today.surface"). [Definitions] gives the registry and `check` the
// definitions without a store; [Tools] gives their implementations over a
// store, as registry tools.
package builtin

import (
	_ "embed"
	"fmt"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/playbook"
)

//go:embed catalog.json
var catalogJSON []byte

// Definitions returns the built-in tool definitions, in catalog order:
// customer.get, customer.search, note.add, note.list, today.surface. Each
// call returns a fresh copy.
func Definitions() []playbook.Definition {
	var defs []playbook.Definition
	if err := json.Unmarshal(catalogJSON, &defs, json.RejectUnknownMembers(true)); err != nil {
		// The catalog is compiled in and tested; failing here is a build bug.
		panic(fmt.Sprintf("builtin: embedded catalog.json is invalid: %v", err))
	}
	return defs
}
