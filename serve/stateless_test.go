package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/serve"
)

// countKinds counts the run's audit records of each kind.
func countKinds(t *testing.T, r *rig, run string) map[string]int {
	t.Helper()
	au, err := r.srv.Audit(context.Background(), run, false)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, rec := range au.Records {
		n[rec.Kind]++
	}
	return n
}

// TestStatelessAgent: a go-sdk client, whose newest revision is the
// sessionless 2026-07-28, negotiates it (no session) and is the run's
// agent with every guarantee a session has: it is offered the step's
// tools, an allowed call reaches Stripe once, a call outside the
// boundary is refused and reaches nothing, and a call that needs
// approval waits inside tools/call until a person approves it through
// the API, then runs once. Its many requests are one attachment (one
// agent.attached record), and the audit chain verifies.
func TestStatelessAgent(t *testing.T) {
	r, rec := approvalRig(t)
	ctx := context.Background()
	run, tok := approvalRunToken(t, r)
	a := r.connectAt(tok.MCPURL, tok.Token, nil)
	if v := a.cs.InitializeResult().ProtocolVersion; v != "2026-07-28" || a.cs.ID() != "" {
		t.Fatalf("the go-sdk client negotiated %q with session %q, want 2026-07-28 without one", v, a.cs.ID())
	}
	a.tools(t, "charge__refund", "charge__get", "customer__get", serve.FinishTool)

	// Allowed: it reaches Stripe, once.
	text, isErr := a.call(t, "charge__get", map[string]any{"chargeId": "ch_stateless"})
	if isErr || chargeReads(rec, "ch_stateless") != 1 {
		t.Fatalf("charge__get: %q (isError %v), %d reads at Stripe, want 1", text, isErr, chargeReads(rec, "ch_stateless"))
	}
	// Outside the boundary: refused, and nothing reaches Stripe.
	before := len(rec.Requests())
	text, isErr = a.call(t, "charge__capture", map[string]any{"chargeId": "ch_stateless"})
	if !isErr || len(rec.Requests()) != before {
		t.Fatalf("charge__capture: %q (isError %v), %d requests at Stripe, want none", text, isErr, len(rec.Requests())-before)
	}
	if n := countKinds(t, r, run)["call.refused"]; n != 1 {
		t.Errorf("%d call.refused records, want 1", n)
	}

	// Needs approval: the call waits in tools/call; approved through the
	// API while it waits, it runs once.
	args := map[string]any{"chargeId": "ch_duplicate", "reason": "duplicate"}
	var wg sync.WaitGroup
	wg.Add(1)
	var got string
	var gotErr bool
	start := time.Now()
	go func() {
		defer wg.Done()
		res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: "charge__refund", Arguments: args})
		if err != nil {
			got, gotErr = err.Error(), true
			return
		}
		got, gotErr = res.Content[0].(*mcp.TextContent).Text, res.IsError
	}()
	var id string
	for deadline := time.Now().Add(10 * time.Second); id == ""; {
		pend, err := r.srv.Pending(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if len(pend) == 1 {
			id = pend[0].ID
		} else if time.Now().After(deadline) {
			t.Fatalf("pending: %+v", pend)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := refunds(rec); n != 0 {
		t.Fatalf("%d refunds before approval", n)
	}
	req, _ := http.NewRequest("POST", r.ts.URL+"/api/v1/runs/"+run+"/decisions/"+id, strings.NewReader(`{"approve": true, "reason": "duplicate charge"}`))
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("deciding: %d %s", resp.StatusCode, b)
	}
	wg.Wait()
	if gotErr || !strings.Contains(got, "re_") {
		t.Fatalf("after approval: %q (error %v)", got, gotErr)
	}
	if d := time.Since(start); d > 1900*time.Millisecond {
		t.Errorf("the call was answered after %v: it did not wait for the decision inside tools/call (serve.approvalWait is 2s)", d)
	}
	if n := refunds(rec); n != 1 {
		t.Fatalf("%d refunds, want 1", n)
	}

	if _, isErr := a.call(t, serve.FinishTool, map[string]any{"output": "refunded once"}); isErr {
		t.Fatal("finish failed")
	}
	r.waitStatus(run, "completed", "")
	kinds := countKinds(t, r, run)
	if kinds["agent.attached"] != 1 {
		t.Errorf("%d agent.attached records, want 1 (one token, one attachment)", kinds["agent.attached"])
	}
	au, err := r.srv.Audit(ctx, run, true)
	if err != nil || !*au.Verified {
		t.Fatalf("audit: %v %+v", err, au.Problems)
	}
	// The run has ended: the token's attachment with it.
	for deadline := time.Now().Add(10 * time.Second); r.srv.Exchange().Attached(run) != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d agents still attached to the ended run", r.srv.Exchange().Attached(run))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStatelessAndSessionClients: clients of both kinds of revision are
// agents of one run at once: one at 2025-11-25 (with a session) and one
// at 2026-07-28 (without); each sees the step's tools and its calls run.
func TestStatelessAndSessionClients(t *testing.T) {
	r, rec := approvalRig(t)
	ctx := context.Background()
	run, a := startApprovalRun(t, r) // 2025-11-25
	if v := a.cs.InitializeResult().ProtocolVersion; v != "2025-11-25" || a.cs.ID() == "" {
		t.Fatalf("the session client negotiated %q with session %q", v, a.cs.ID())
	}
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	b := r.connectAt(tok.MCPURL, tok.Token, nil)
	if v := b.cs.InitializeResult().ProtocolVersion; v != "2026-07-28" || b.cs.ID() != "" {
		t.Fatalf("the stateless client negotiated %q with session %q", v, b.cs.ID())
	}
	b.tools(t, "charge__refund", "charge__get", "customer__get", serve.FinishTool)
	for i, ag := range []*agent{a, b} {
		id := fmt.Sprintf("ch_both%d", i)
		if text, isErr := ag.call(t, "charge__get", map[string]any{"chargeId": id}); isErr || chargeReads(rec, id) != 1 {
			t.Fatalf("client %d: %q, %d reads", i, text, chargeReads(rec, id))
		}
	}
	if n := countKinds(t, r, run)["agent.attached"]; n != 2 {
		t.Errorf("%d agent.attached records, want 2 (a session and a stateless token)", n)
	}
}

// metaOf is a request's _meta with the sessionless triple at version.
func metaOf(version string) string {
	return fmt.Sprintf(`{"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientInfo":{"name":"hostile","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`, version)
}

// TestAttackStatelessShapes: requests that mix the sessionless revision
// with another, or with a session, are refused before anything is
// served under them: 400 with a JSON-RPC error, audited as
// agent.rejected, and nothing reaches Stripe; a sessionless request
// without a token gets 401. A forged Mcp-Session-Id (here a real
// session's, of the same run and token) beside 2026-07-28 is served
// under neither. The gateway answers a good request afterwards.
func TestAttackStatelessShapes(t *testing.T) {
	r, rec := approvalRig(t)
	run, tok := approvalRunToken(t, r)
	a := r.connect(tok.MCPURL, tok.Token) // 2025-11-25, with the same token
	a.tools(t, "charge__refund", "charge__get", "customer__get", serve.FinishTool)
	call := func(meta string) string {
		return `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"charge__get","arguments":{"chargeId":"ch_hostile"},"_meta":` + meta + `}}`
	}
	h := func(kv ...string) http.Header {
		m := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			m.Add(kv[i], kv[i+1])
		}
		return m
	}
	before := countKinds(t, r, run)["agent.rejected"]
	cases := []struct {
		name string
		body string
		hdr  http.Header
		code string // the JSON-RPC error code the answer carries
	}{
		{"header 2026-07-28, _meta 2025-11-25", call(metaOf("2025-11-25")), h("Mcp-Protocol-Version", "2026-07-28"), "-32020"},
		{"header 2025-11-25, _meta 2026-07-28", call(metaOf("2026-07-28")), h("Mcp-Protocol-Version", "2025-11-25", "Mcp-Session-Id", a.cs.ID()), "-32020"},
		{"no header, _meta 2026-07-28", call(metaOf("2026-07-28")), nil, "-32020"},
		{"_meta revision a number", call(`{"io.modelcontextprotocol/protocolVersion":20260728,"io.modelcontextprotocol/clientCapabilities":{}}`), h("Mcp-Protocol-Version", "2026-07-28"), "-32020"},
		{"header 2026-07-28, no _meta", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"charge__get","arguments":{"chargeId":"ch_hostile"}}}`, h("Mcp-Protocol-Version", "2026-07-28"), "-32602"},
		{"forged session with 2026-07-28", call(metaOf("2026-07-28")), h("Mcp-Protocol-Version", "2026-07-28", "Mcp-Session-Id", a.cs.ID()), "-32600"},
		{"made-up session with 2026-07-28", call(metaOf("2026-07-28")), h("Mcp-Protocol-Version", "2026-07-28", "Mcp-Session-Id", "rep_forged.abc"), "-32600"},
		{"two revision headers", call(metaOf("2026-07-28")), h("Mcp-Protocol-Version", "2026-07-28", "Mcp-Protocol-Version", "2025-11-25"), "-32600"},
		{"a header that is not a revision", call(metaOf("2026-07-28x")), h("Mcp-Protocol-Version", "2026-07-28x"), "-32600"},
	}
	for i, c := range cases {
		status, body := rawPost(t, tok.MCPURL, tok.Token, []byte(c.body), c.hdr)
		if status != http.StatusBadRequest || !strings.Contains(body, `"code":`+c.code) {
			t.Errorf("%s: %d %s, want 400 with JSON-RPC error %s", c.name, status, body, c.code)
		}
		if n := countKinds(t, r, run)["agent.rejected"] - before; n != i+1 {
			t.Errorf("%s: %d agent.rejected records so far, want %d", c.name, n, i+1)
		}
	}
	status, body := rawPost(t, tok.MCPURL, "", []byte(call(metaOf("2026-07-28"))), h("Mcp-Protocol-Version", "2026-07-28"))
	if status != http.StatusUnauthorized {
		t.Errorf("no token: %d %s, want 401", status, body)
	}
	if n := chargeReads(rec, "ch_hostile"); n != 0 {
		t.Fatalf("%d refused calls reached Stripe", n)
	}
	// Still served, and the session still works.
	status, body = rawPost(t, tok.MCPURL, tok.Token, []byte(call(metaOf("2026-07-28"))), h("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "charge__get"))
	if status != http.StatusOK || chargeReads(rec, "ch_hostile") != 1 {
		t.Fatalf("a good stateless call: %d %s, %d reads at Stripe", status, body, chargeReads(rec, "ch_hostile"))
	}
	if _, isErr := a.call(t, "charge__get", map[string]any{"chargeId": "ch_session"}); isErr || chargeReads(rec, "ch_session") != 1 {
		t.Fatal("the session's call after the hostile requests failed")
	}
	var res struct {
		Result struct {
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	data := body
	if i := strings.Index(data, "data: "); i >= 0 {
		data = strings.TrimSpace(data[i+len("data: "):])
	}
	if err := json.Unmarshal([]byte(data), &res); err != nil || res.Result.IsError {
		t.Errorf("the good stateless call's answer: %s (%v)", body, err)
	}
}

// TestStatelessRevoked: revoking a sessionless agent's token ends its
// attachment (its lease and its subscriptions/listen stream) at once,
// and its next request is answered 401 and reaches nothing.
func TestStatelessRevoked(t *testing.T) {
	r, rec := approvalRig(t)
	ctx := context.Background()
	run, tok := approvalRunToken(t, r)
	a := r.connectAt(tok.MCPURL, tok.Token, nil)
	a.tools(t, "charge__refund", "charge__get", "customer__get", serve.FinishTool)
	if n := r.srv.Exchange().Attached(run); n < 1 {
		t.Fatalf("%d agents attached after the stateless client listed its tools", n)
	}
	if _, err := r.srv.RevokeAgentTokens(ctx, run, "", "tester"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); r.srv.Exchange().Attached(run) != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d agents still attached after the token was revoked", r.srv.Exchange().Attached(run))
		}
	}
	if _, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: "charge__get", Arguments: map[string]any{"chargeId": "ch_revoked"}}); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("a call with the revoked token: %v, want 401", err)
	}
	if n := chargeReads(rec, "ch_revoked"); n != 0 {
		t.Fatalf("the revoked token's call reached Stripe %d times", n)
	}
}
