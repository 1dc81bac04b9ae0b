package mcphost_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openplaybook/openplaybook/mcphost"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
)

func connect(t *testing.T, cfg mcphost.ServerConfig) *mcphost.Server {
	t.Helper()
	s, err := mcphost.Connect(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func tools(t *testing.T, s *mcphost.Server) map[string]mcphost.Tool {
	t.Helper()
	list, err := s.Tools(context.Background())
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	m := map[string]mcphost.Tool{}
	for _, tl := range list {
		m[tl.Upstream.Name] = tl
	}
	return m
}

func boolStr(b *bool) string {
	if b == nil {
		return "unknown"
	}
	if *b {
		return "true"
	}
	return "false"
}

// risk summarizes what a definition says about risk.
func risk(tl mcphost.Tool) string {
	rc := tl.Definition.RiskClass
	if rc == "" {
		rc = "unknown"
	}
	return "riskClass=" + rc + " sideEffecting=" + boolStr(tl.Definition.SideEffecting) + " requiresApproval=" + boolStr(tl.Definition.RequiresApproval)
}

func resultText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestMemoryServer(t *testing.T) {
	t.Parallel()
	start := time.Now()
	s := connect(t, mcptest.MemoryServer(t, "memory"))
	t.Logf("connected in %v", time.Since(start))
	got := tools(t, s)
	var names []string
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, want := range []string{"create_entities", "delete_entities", "search_nodes", "read_graph", "open_nodes"} {
		if _, ok := got[want]; !ok {
			t.Errorf("tool %q not listed; got %v", want, names)
		}
	}
	// The server's real annotations (dist/index.js): delete_* are
	// readOnlyHint false, destructiveHint true; create_* readOnlyHint
	// false, destructiveHint false; read_graph, search_nodes, open_nodes
	// readOnlyHint true.
	want := map[string]string{
		"delete_entities": "riskClass=unknown sideEffecting=true requiresApproval=unknown",
		"create_entities": "riskClass=unknown sideEffecting=true requiresApproval=unknown",
		"search_nodes":    "riskClass=read sideEffecting=false requiresApproval=unknown",
		"read_graph":      "riskClass=read sideEffecting=false requiresApproval=unknown",
	}
	for name, w := range want {
		if r := risk(got[name]); r != w {
			t.Errorf("%s: %s, want %s", name, r, w)
		}
	}
	d := got["search_nodes"]
	if d.Name != "mcp.memory.search_nodes" || d.Definition.Name != d.Name || d.Definition.Source != "mcp" || d.Problem != "" {
		t.Errorf("search_nodes: Name %q, Definition.Name %q, Source %q, Problem %q", d.Name, d.Definition.Name, d.Definition.Source, d.Problem)
	}
	if d.Definition.Permissions != nil {
		t.Errorf("Permissions = %#v, want nil (MCP does not say)", d.Definition.Permissions)
	}
	if !strings.HasPrefix(string(d.Definition.InputSchema), `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"`) {
		t.Errorf("InputSchema is not the raw upstream schema: %s", d.Definition.InputSchema)
	}
	if len(d.Definition.OutputSchema) == 0 || d.Definition.Description == "" {
		t.Errorf("OutputSchema %s, Description %q", d.Definition.OutputSchema, d.Definition.Description)
	}

	ctx := context.Background()
	res, err := s.Call(ctx, "create_entities", map[string]any{"entities": []any{
		map[string]any{"name": "widget-42", "entityType": "widget", "observations": []any{"blue"}},
	}})
	if err != nil || res.IsError {
		t.Fatalf("create_entities: %v %+v", err, res)
	}
	res, err = s.Call(ctx, "search_nodes", json.RawMessage(`{"query":"widget-42"}`))
	if err != nil || res.IsError {
		t.Fatalf("search_nodes: %v %+v", err, res)
	}
	if txt := resultText(t, res); !strings.Contains(txt, "widget-42") {
		t.Errorf("search_nodes result %q lacks the entity", txt)
	}
	// An unknown tool: the TypeScript SDK answers with a tool error
	// (isError), not a JSON-RPC error; either is fine, success is not.
	if res, err := s.Call(ctx, "no_such_tool", nil); err == nil && !res.IsError {
		t.Errorf("calling an unknown tool succeeded: %+v", res)
	}
	start = time.Now()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	t.Logf("closed in %v", time.Since(start))
}
