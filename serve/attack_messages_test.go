package serve_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/serve"
)

// TestAttackMoreHostileMessages: messages the gateway's strict check
// must refuse (and audit) besides those of TestGatewayRejectsHostileMessages,
// each of which would add a note if it ran.
func TestAttackMoreHostileMessages(t *testing.T) {
	r := newRig(t, "")
	run, tok, a := startAgentRun(t, r)
	sid := a.cs.ID()
	call := func(params string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":` + params + `}`
	}
	note := `{"name":"note__add","arguments":{"customerId":"cus_ada","body":"x"}}`
	big := call(`{"name":"note__add","arguments":{"customerId":"cus_ada","body":"` + strings.Repeat("a", serve.MaxAgentMessageBytes) + `"}}`)
	deep := call(`{"name":"note__add","arguments":{"customerId":"cus_ada","body":"x","tags":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`)
	cases := []struct {
		name, body string
		status     int
	}{
		{"over 4 MiB", big, http.StatusRequestEntityTooLarge},
		{"byte order mark", "\xef\xbb\xbf" + call(note), http.StatusBadRequest},
		{"Kelvin-sign member beside its ASCII twin", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"customer__get","arguments":{"customerId":"cus_ada"}},"paramſ":` + note + `}`, http.StatusBadRequest},
		{"case-variant method member", `{"jsonrpc":"2.0","id":7,"Method":"tools/execute","method":"tools/call","params":` + note + `}`, http.StatusBadRequest},
		{"method member escaped twice", `{"jsonrpc":"2.0","id":7,"method":"tools/call","m\u0065thod":"tools/call","params":` + note + `}`, http.StatusBadRequest},
		{"duplicate params", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"customer__get","arguments":{"customerId":"cus_ada"}},"params":` + note + `}`, http.StatusBadRequest},
		{"deep nesting", deep, http.StatusBadRequest},
		{"trailing garbage", call(note) + "x", http.StatusBadRequest},
		{"unknown notification", `{"jsonrpc":"2.0","method":"notifications/tools/call","params":` + note + `}`, http.StatusOK},
		{"sampling request from the client", `{"jsonrpc":"2.0","id":8,"method":"sampling/createMessage","params":{}}`, http.StatusOK},
		{"truncated", call(note)[:40], http.StatusBadRequest},
		{"empty", "", http.StatusBadRequest},
	}
	for _, c := range cases {
		status, body := post(t, tok.MCPURL, tok.Token, sid, []byte(c.body), nil)
		if status != c.status {
			t.Errorf("%s: status %d, want %d (%.200s)", c.name, status, c.status, body)
		}
		var msg struct {
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &msg); err != nil || msg.Error == nil {
			t.Errorf("%s: answer %.200q is not a JSON-RPC error", c.name, body)
		}
	}
	if n := countNotes(t, r.st, "cus_ada"); n != 0 {
		t.Errorf("BROKEN: %d notes were added by refused messages", n)
	}
	rejected := 0
	for _, k := range auditKinds(t, r, run) {
		if k == "agent.rejected" {
			rejected++
		}
	}
	if rejected != len(cases) {
		t.Errorf("BROKEN: %d agent.rejected records for %d refused messages", rejected, len(cases))
	}
	// A response-shaped message (no method) names nothing to run: it is
	// refused (TestAttackMessagesWithoutMethod); the session still works.
	post(t, tok.MCPURL, tok.Token, sid, []byte(`{"jsonrpc":"2.0","id":99,"result":{"content":[]}}`), nil)
	if _, isErr := a.call(t, "customer__get", map[string]any{"customerId": "cus_ada"}); isErr {
		t.Fatal("the session broke")
	}
	if n := countNotes(t, r.st, "cus_ada"); n != 0 {
		t.Errorf("BROKEN: %d notes", n)
	}
	au, err := r.srv.Audit(context.Background(), run, true)
	if err != nil || !*au.Verified {
		t.Fatalf("audit: %v %+v", err, au.Problems)
	}
}

// TestAttackScopedTokenReads: a token scoped to agent "writer" reads
// nothing of the researcher's executing step (resource, instructions,
// tool list), and cannot run or finish it.
func TestAttackScopedTokenReads(t *testing.T) {
	r := newRig(t, "")
	ctx := context.Background()
	run, ds, err := r.srv.CreateRun(ctx, "two-agents.json", readTestdata(t, "two-agents.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")
	rt, err := r.srv.IssueAgentToken(ctx, run, "researcher", "tester")
	if err != nil {
		t.Fatal(err)
	}
	wt, err := r.srv.IssueAgentToken(ctx, run, "writer", "tester")
	if err != nil {
		t.Fatal(err)
	}
	researcher := r.connect(rt.MCPURL, rt.Token)
	researcher.tools(t, "customer__get", serve.FinishTool)
	writer := r.connect(wt.MCPURL, wt.Token)
	writer.tools(t, serve.FinishTool)
	res, err := writer.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "openplaybook://runs/" + run + "/step"})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Contents[0].Text; strings.Contains(text, "Look the customer up") || strings.Contains(text, "customer__get") {
		t.Errorf("BROKEN: the writer's token reads the researcher's step: %s", text)
	}
	if ins := writer.cs.InitializeResult().Instructions; strings.Contains(ins, "Look the customer up") {
		t.Errorf("BROKEN: the writer's instructions hold the researcher's step: %s", ins)
	}
	// Another run's step resource, named by URI: not served.
	if _, err := writer.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "openplaybook://runs/run_0000000000000000/step"}); err == nil {
		t.Error("another run's step resource was served")
	}
	if _, isErr := writer.call(t, "customer.get", map[string]any{"customerId": "cus_ada"}); !isErr {
		t.Error("BROKEN: the writer ran the researcher's tool by its spec name")
	}
	if _, isErr := writer.call(t, serve.FinishTool, map[string]any{"output": "x"}); !isErr {
		t.Error("BROKEN: the writer finished the researcher's step")
	}
	// The researcher's session used with the writer's token: refused.
	call := []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"customer__get","arguments":{"customerId":"cus_ada"}}}`)
	if code, _ := post(t, rt.MCPURL, wt.Token, researcher.cs.ID(), call, nil); code != http.StatusNotFound {
		t.Errorf("BROKEN: the writer's token drove the researcher's session: %d", code)
	}
	for _, m := range []string{http.MethodDelete, http.MethodGet} {
		req, _ := http.NewRequest(m, rt.MCPURL, nil)
		req.Header.Set("Authorization", "Bearer "+wt.Token)
		req.Header.Set("Mcp-Session-Id", researcher.cs.ID())
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("BROKEN: %s of the researcher's session with the writer's token: %d", m, resp.StatusCode)
		}
	}
	if _, isErr := researcher.call(t, "customer__get", map[string]any{"customerId": "cus_ada"}); isErr {
		t.Error("the researcher's session broke")
	}
}
