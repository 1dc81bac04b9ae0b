package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// TestConcurrentCalls: an agent that sends many calls at once through one
// Caller (an external agent does) gets every answer; the server executes
// them concurrently; every call is recorded once, in its final state, and
// the store agrees with the audit log.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	var inFlight, maxInFlight, served atomic.Int32
	srv := mcp.NewServer(&mcp.Implementation{Name: "ctr", Version: "1.0.0"}, nil)
	srv.AddTool(&mcp.Tool{Name: "lookup", Description: lookupDesc, InputSchema: rawSchema(lookupIn), OutputSchema: rawSchema(lookupOut),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := inFlight.Add(1)
			for {
				m := maxInFlight.Load()
				if n <= m || maxInFlight.CompareAndSwap(m, n) {
					break
				}
			}
			// Hold the call until others arrive (or a while passes), so
			// concurrent execution shows as more than one in flight.
			deadline := time.Now().Add(500 * time.Millisecond)
			for inFlight.Load() < 4 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			inFlight.Add(-1)
			k := served.Add(1)
			var in struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &in)
			return &mcp.CallToolResult{StructuredContent: map[string]any{"id": in.ID, "n": k},
				Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(`{"id":%q,"n":%d}`, in.ID, k)}}}, nil
		})
	url := mcptest.ServeHTTP(t, srv)
	r := newRig(t, rigConfig{http: map[string]string{"ctr": url}, serverExtra: map[string]map[string]any{"ctr": {"toolsCheck": "on-change"}}},
		buildDoc(t, "concurrent", agentStep("act", "ops", []string{"mcp.ctr.lookup", "note.add"}, "")))
	const reads, notes = 32, 8
	var answered, failed atomic.Int32
	drv := scriptedFn(func(ctx context.Context, c driver.Caller) {
		var wg sync.WaitGroup
		for i := range reads + notes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				call := driver.Call{Name: "mcp.ctr.lookup", Arguments: fmt.Appendf(nil, `{"id":"w%d"}`, i)}
				if i >= reads {
					call = driver.Call{Name: "note.add", Arguments: fmt.Appendf(nil, `{"customerId":"cus_ada","body":"note %d"}`, i)}
				}
				res, err := c.Call(ctx, call)
				if err != nil || res.Error != "" {
					failed.Add(1)
					t.Errorf("call %d: %v %s", i, err, res.Error)
					return
				}
				answered.Add(1)
			}()
		}
		wg.Wait()
	})
	out, err := r.engineWith(0, map[string]driver.Driver{"ops": drv}, nil, nil).Start(context.Background(), nil)
	if err != nil || out.Status != runtime.Completed {
		t.Fatalf("outcome %+v %v", out, err)
	}
	if answered.Load() != reads+notes || served.Load() != reads {
		t.Fatalf("answered %d, server served %d lookups; want %d and %d", answered.Load(), served.Load(), reads+notes, reads)
	}
	if maxInFlight.Load() < 2 {
		t.Errorf("at most %d lookup in flight at once: calls were not executed concurrently", maxInFlight.Load())
	}
	rows := r.calls(out.Run)
	if len(rows) != reads+notes {
		t.Fatalf("%d call records, want %d", len(rows), reads+notes)
	}
	seen := map[int]bool{}
	for _, c := range rows {
		if c.State != store.CallSucceeded || seen[c.Index] {
			t.Fatalf("call %d: state %s (index seen before: %v)", c.Index, c.State, seen[c.Index])
		}
		seen[c.Index] = true
	}
	probs, err := runtime.Reconcile(context.Background(), r.st, out.Run)
	if err != nil || len(probs) > 0 {
		t.Fatalf("reconcile: %v %v", err, probs)
	}
}
