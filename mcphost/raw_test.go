package mcphost_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/mcphost"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
)

// rawServer serves the tools array toolsJSON, byte for byte.
func rawServer(t *testing.T, name, toolsJSON string) mcphost.ServerConfig {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "rawserver.js"))
	if err != nil {
		t.Fatal(err)
	}
	return mcphost.ServerConfig{Name: name, Command: mcptest.Node(t), Args: []string{script}, Env: map[string]string{"TOOLS": toolsJSON}}
}

// TestAnnotationsOnTheWire maps annotations as the server wrote them:
// absent stays unknown, an explicit false speaks.
func TestAnnotationsOnTheWire(t *testing.T) {
	t.Parallel()
	const schema = `{"type":"object","properties":{"b":{"type":"number","maximum":1.50},"a":{"type":"string"}}}`
	tools := `[
 {"name":"none","description":"no annotations","inputSchema":` + schema + `},
 {"name":"empty","inputSchema":{"type":"object"},"annotations":{}},
 {"name":"ro_true","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},
 {"name":"ro_false","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false}},
 {"name":"ro_null","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":null}},
 {"name":"ro_case","inputSchema":{"type":"object"},"annotations":{"ReadOnlyHint":true}},
 {"name":"destructive_only","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}},
 {"name":"not_destructive_only","inputSchema":{"type":"object"},"annotations":{"destructiveHint":false,"idempotentHint":true}},
 {"name":"conflict","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"destructiveHint":true}},
 {"name":"open_world","inputSchema":{"type":"object"},"annotations":{"openWorldHint":true,"title":"T"}},
 {"name":"twice","description":"first","inputSchema":{"type":"object"}},
 {"name":"twice","description":"second","inputSchema":{"type":"object"}},
 {"name":"header","inputSchema":{"type":"object","properties":{"o":{"type":"object","x-mcp-header":"X-O"}}},"annotations":{"readOnlyHint":true}}
]`
	s := connect(t, rawServer(t, "raw", tools))
	list, err := s.Tools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tl := range list {
		line := tl.Upstream.Name + ": " + risk(tl)
		if tl.Problem != "" {
			line += " problem=" + tl.Problem
		}
		got = append(got, line)
	}
	want := []string{
		"none: riskClass=unknown sideEffecting=unknown requiresApproval=unknown",
		"empty: riskClass=unknown sideEffecting=unknown requiresApproval=unknown",
		"ro_true: riskClass=read sideEffecting=false requiresApproval=unknown",
		"ro_false: riskClass=unknown sideEffecting=true requiresApproval=unknown",
		"ro_null: riskClass=unknown sideEffecting=unknown requiresApproval=unknown",
		"ro_case: riskClass=unknown sideEffecting=unknown requiresApproval=unknown",
		"destructive_only: riskClass=unknown sideEffecting=true requiresApproval=unknown",
		"not_destructive_only: riskClass=unknown sideEffecting=unknown requiresApproval=unknown",
		"conflict: riskClass=unknown sideEffecting=true requiresApproval=unknown",
		"open_world: riskClass=unknown sideEffecting=unknown requiresApproval=unknown",
		"twice: riskClass=unknown sideEffecting=unknown requiresApproval=unknown problem=the server lists this tool name more than once",
		"twice: riskClass=unknown sideEffecting=unknown requiresApproval=unknown problem=the server lists this tool name more than once",
		"header: riskClass=read sideEffecting=false requiresApproval=unknown problem=go-sdk (the MCP client library) refused this tool's listing, for example for invalid x-mcp-header annotations in its inputSchema",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The schema is the server's bytes: member order and number spelling
	// kept.
	if string(list[0].Definition.InputSchema) != schema {
		t.Errorf("InputSchema = %s, want %s", list[0].Definition.InputSchema, schema)
	}
	if list[0].Definition.OutputSchema != nil {
		t.Errorf("OutputSchema = %s, want absent", list[0].Definition.OutputSchema)
	}
}

// TestMalformedToolListing: go-sdk fails a whole tools/list page when one
// tool does not decode; the others are still listed, and the malformed one
// is reported.
func TestMalformedToolListing(t *testing.T) {
	t.Parallel()
	s := connect(t, rawServer(t, "raw", `[
 {"name":"ro_string","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":"yes"}},
 {"name":"fine","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]`))
	got := tools(t, s)
	if r := risk(got["fine"]); r != "riskClass=read sideEffecting=false requiresApproval=unknown" || got["fine"].Problem != "" {
		t.Errorf("fine: %s, problem %q", r, got["fine"].Problem)
	}
	bad := got["ro_string"]
	if !strings.Contains(bad.Problem, "does not follow the MCP schema") || risk(bad) != "riskClass=unknown sideEffecting=unknown requiresApproval=unknown" {
		t.Errorf("ro_string: %s, problem %q", risk(bad), bad.Problem)
	}
}
