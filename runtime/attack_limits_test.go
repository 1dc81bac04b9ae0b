package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// A server whose lookup (same listing as ctr's, so import finds no drift)
// answers with isError and a 6 MiB text: the error text is not bounded by
// the 4 MiB result limit, and reaches the store, the audit log and the agent.
func TestAttackHugeToolError(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("A", 6<<20)
	srv := mcp.NewServer(&mcp.Implementation{Name: "ctr", Version: "1.0.0"}, nil)
	srv.AddTool(&mcp.Tool{Name: "lookup", Description: lookupDesc, InputSchema: rawSchema(lookupIn), OutputSchema: rawSchema(lookupOut),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: big}}}, nil
		})
	url := mcptest.ServeHTTP(t, srv)
	r := newRig(t, rigConfig{http: map[string]string{"ctr": url}}, buildDoc(t, "hugeerr", agentStep("act", "ops", []string{"mcp.ctr.lookup"}, "")))
	ctx := context.Background()
	var seenLen int
	drv := scriptedFn(func(ctx context.Context, c driver.Caller) {
		res, _ := c.Call(ctx, driver.Call{Name: "mcp.ctr.lookup", Arguments: []byte(`{"id":"w1"}`)})
		seenLen = len(res.Error) + len(res.Content)
	})
	out, err := r.engineWith(0, map[string]driver.Driver{"ops": drv}, nil, nil).Start(ctx, nil)
	t.Logf("outcome %+v %v", out.Status, err)
	rows := r.calls(out.Run)
	maxAudit := 0
	for _, rec := range r.auditOf(out.Run) {
		if len(rec.Data) > maxAudit {
			maxAudit = len(rec.Data)
		}
	}
	t.Logf("agent saw %d bytes; stored error %d bytes; largest audit data %d bytes", seenLen, len(rows[0].Error), maxAudit)
	if seenLen > runtime.DefaultMaxResultBytes || len(rows[0].Error) > runtime.DefaultMaxResultBytes || maxAudit > runtime.DefaultMaxResultBytes {
		t.Errorf("BROKEN: a %d-byte tool answer bypassed the %d-byte result limit (state %s)", len(big), runtime.DefaultMaxResultBytes, rows[0].State)
	}
	_ = store.CallFailed
}

type scriptedFn func(ctx context.Context, c driver.Caller)

func (f scriptedFn) RunStep(ctx context.Context, in driver.StepInput, c driver.Caller) (jsontext.Value, error) {
	f(ctx, c)
	return []byte(`"done"`), nil
}
