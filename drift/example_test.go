package drift_test

import (
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/drift"
	"github.com/openplaybook/openplaybook/playbook"
)

// A document calls server-memory's delete_entities a read tool; the live
// server marks it destructive (sideEffecting true) and says nothing of
// riskClass, approval or permissions (not drift: the registry does not
// say). Its schema now also requires a reason.
func ExampleCompare() {
	no := false
	yes := true
	doc := playbook.Definition{
		Name:          "mcp.memory.delete_entities",
		Source:        "mcp",
		Description:   "Delete multiple entities and their associated relations from the knowledge graph",
		Permissions:   []string{"memory:read"},
		InputSchema:   jsontext.Value(`{"type": "object", "properties": {"entityNames": {"type": "array", "items": {"type": "string"}}}, "required": ["entityNames"]}`),
		RiskClass:     "read",
		SideEffecting: &no,
	}
	reg := playbook.Definition{
		Name:          "mcp.memory.delete_entities",
		Source:        "mcp",
		Description:   "Delete multiple entities and their associated relations from the knowledge graph",
		InputSchema:   jsontext.Value(`{"type":"object","properties":{"entityNames":{"type":"array","items":{"type":"string"}},"reason":{"type":"string"}},"required":["entityNames","reason"]}`),
		SideEffecting: &yes,
	}
	for _, f := range drift.Compare(doc, reg) {
		fmt.Println(f)
	}
	// Output:
	// error: tool "mcp.memory.delete_entities": inputSchema: property "reason": required and declared by the registry, not by the document [drift-input-schema]
	// error: tool "mcp.memory.delete_entities": riskClass is "read" in the document, but the registry marks the tool side-effecting (sideEffecting true) and does not state a riskClass; a side-effecting tool is not a read tool, so the document understates what it does [drift-risk-class]
	// error: tool "mcp.memory.delete_entities": sideEffecting is true in the registry, false in the document: the document hides a side effect [drift-side-effecting]
}
