package mcphost

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool's fingerprint is the same whether its schemas are the server's
// text or go-sdk's decoded tree, and whatever the order of their members
// (as when they were always decoded); any other change to a schema, or to
// another member, changes it.
func TestFingerprint(t *testing.T) {
	const schema = `{"type": "object", "properties": {"n": {"type": "integer", "maximum": 1e2}}}`
	var tree any
	if err := json.Unmarshal([]byte(schema), &tree); err != nil {
		t.Fatal(err)
	}
	tool := func(in any, title string) *mcp.Tool {
		return &mcp.Tool{Name: "t", Title: title, InputSchema: in}
	}
	base := fingerprint(tool(json.RawMessage(schema), ""))
	for name, same := range map[string]*mcp.Tool{
		"decoded":   tool(tree, ""),
		"reordered": tool(json.RawMessage(`{"properties":{"n":{"maximum":100,"type":"integer"}},"type":"object"}`), ""),
	} {
		if fingerprint(same) != base {
			t.Errorf("%s: another fingerprint", name)
		}
	}
	for name, other := range map[string]*mcp.Tool{
		"maximum":   tool(json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","maximum":101}}}`), ""),
		"type":      tool(json.RawMessage(`{"type":"object","properties":{"n":{"type":"number","maximum":100}}}`), ""),
		"no schema": tool(nil, ""),
		"title":     tool(json.RawMessage(schema), "T"),
		"output":    {Name: "t", InputSchema: json.RawMessage(schema), OutputSchema: json.RawMessage(`{"type":"object"}`)},
	} {
		if fingerprint(other) == base {
			t.Errorf("%s: the same fingerprint", name)
		}
	}
	// Text that is not JSON has a fingerprint (of its error), never a
	// panic, and not that of a valid schema.
	if fingerprint(tool(json.RawMessage(`{"type":`), "")) == base {
		t.Error("invalid JSON has the valid schema's fingerprint")
	}
}
