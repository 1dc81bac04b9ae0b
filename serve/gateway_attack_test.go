package serve_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/serve"
	"github.com/openplaybook/openplaybook/store"
)

// startAgentRun creates a run of agent.json, issues its agent token and
// connects an agent, which is offered the first step's tools.
func startAgentRun(t *testing.T, r *rig) (run string, tok serve.IssuedToken, a *agent) {
	t.Helper()
	ctx := context.Background()
	run, ds, err := r.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err = r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	a = r.connect(tok.MCPURL, tok.Token)
	a.tools(t, "customer__get", "note__add", serve.FinishTool)
	return run, tok, a
}

// post sends one raw JSON-RPC body to the run's MCP endpoint as the agent
// of an initialized session (sid), and returns the status and body.
func post(t *testing.T, url, tok, sid string, body []byte, hdr map[string]string) (int, string) {
	t.Helper()
	h := http.Header{}
	if sid != "" {
		h.Set("Mcp-Session-Id", sid)
		h.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	for k, v := range hdr {
		h.Set(k, v)
	}
	return rawPost(t, url, tok, body, h)
}

// rawPost sends one raw body to the run's MCP endpoint with token tok
// ("" for none) and the headers hdr (a "Host" one is the request's host),
// and returns the status and body.
func rawPost(t *testing.T, url, tok string, body []byte, hdr http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, vs := range hdr {
		if k == "Host" {
			req.Host = vs[0]
			continue
		}
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func auditKinds(t *testing.T, r *rig, run string) []string {
	t.Helper()
	au, err := r.srv.Audit(context.Background(), run, false)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, rec := range au.Records {
		kinds = append(kinds, rec.Kind)
	}
	return kinds
}

// TestGatewayRejectsHostileMessages: what a hostile agent sends that is
// not one strictly readable JSON-RPC message, or names a method the
// gateway does not serve, is answered with a JSON-RPC error and audited,
// and nothing it asked for runs.
func TestGatewayRejectsHostileMessages(t *testing.T) {
	r := newRig(t, "")
	run, tok, a := startAgentRun(t, r)
	sid := a.cs.ID()
	note := func(body string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"note__add","arguments":{"customerId":"cus_ada","body":"` + body + `"}}}`
	}
	cases := []struct {
		name, body, want string
		code             int
	}{
		{"batch", "[" + note("batched") + "]", "batch", -32600},
		{"duplicate member", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"customer__get","name":"note__add","arguments":{"customerId":"cus_ada","body":"dup"}}}`, "twice", -32600},
		{"case-variant members", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"Name":"customer__get","name":"note__add","arguments":{"customerId":"cus_ada","body":"case"}}}`, "case", -32600},
		{"duplicate argument", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"note__add","arguments":{"customerId":"cus_ada","body":"a","body":"b"}}}`, "twice", -32600},
		{"invalid UTF-8", note("bad \xff byte"), "UTF-8", -32600},
		{"lone surrogate", note(`\ud800`), "surrogate", -32600},
		{"two values", note("one") + note("two"), "more than one", -32600},
		{"unknown method", `{"jsonrpc":"2.0","id":7,"method":"tools/execute","params":{"name":"note__add"}}`, "not served", -32601},
		{"not an object", `"tools/call"`, "not a JSON object", -32600},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, body := post(t, tok.MCPURL, tok.Token, sid, []byte(c.body), nil)
			var msg struct {
				Error *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &msg); err != nil || msg.Error == nil {
				t.Fatalf("answer %q is not a JSON-RPC error", body)
			}
			if msg.Error.Code != c.code || !strings.Contains(msg.Error.Message, c.want) {
				t.Fatalf("error %d %q, want %d and %q", msg.Error.Code, msg.Error.Message, c.code, c.want)
			}
		})
	}
	if n := countNotes(t, r.st, "cus_ada"); n != 0 {
		t.Fatalf("%d notes were added by rejected messages", n)
	}
	rejected := 0
	for _, k := range auditKinds(t, r, run) {
		if k == "agent.rejected" {
			rejected++
		}
	}
	if rejected != len(cases) {
		au, _ := r.srv.Audit(context.Background(), run, false)
		for _, rec := range au.Records {
			if rec.Kind == "agent.rejected" {
				t.Log(string(rec.Data))
			}
		}
		t.Fatalf("%d agent.rejected records, want %d", rejected, len(cases))
	}
	// The session still works after the rejections.
	if _, isErr := a.call(t, "customer__get", map[string]any{"customerId": "cus_ada"}); isErr {
		t.Fatal("the session broke")
	}
}

// TestGatewayTokens: the MCP endpoint answers 401 to no token, a wrong
// one, another run's, a revoked one, an expired one and one whose run has
// ended; the store holds tokens only as hashes.
func TestGatewayTokens(t *testing.T) {
	r := newRig(t, "")
	ctx := context.Background()
	run, tok, _ := startAgentRun(t, r)
	init := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	if code, _ := post(t, tok.MCPURL, tok.Token, "", init, nil); code != http.StatusOK {
		t.Fatalf("a valid token: %d", code)
	}
	other, _, err := r.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_grace"}`))
	if err != nil {
		t.Fatal(err)
	}
	r.waitStatus(other, "waiting", "agent")
	otherTok, err := r.srv.IssueAgentToken(ctx, other, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	for name, tk := range map[string]string{"none": "", "wrong": tok.Token + "x", "operator": operatorToken, "other run's": otherTok.Token} {
		if code, _ := post(t, tok.MCPURL, tk, "", init, nil); code != http.StatusUnauthorized {
			t.Errorf("%s token: %d, want 401", name, code)
		}
	}
	// Expired: a token whose expiry has passed.
	expired := "opa_expired-token-for-the-test"
	h := sha256.Sum256([]byte(expired))
	if err := r.st.Tx(ctx, func(tx store.Tx) error {
		_, err := tx.CreateAgentToken(run, "", hex.EncodeToString(h[:]), "tester", time.Now().Add(-time.Second))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if code, _ := post(t, tok.MCPURL, expired, "", init, nil); code != http.StatusUnauthorized {
		t.Errorf("expired token: %d, want 401", code)
	}
	// Only hashes are stored.
	db, err := r.st.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.h.Store.SQLite != "" {
		f, _ := os.ReadFile(r.h.Store.SQLite)
		db = append(db, f...)
	}
	if bytes.Contains(db, []byte(tok.Token)) {
		t.Error("the store (its dump, or its file) holds the token itself")
	}
	// Revoked.
	if n, err := r.srv.RevokeAgentTokens(ctx, run, "", "tester"); err != nil || n != 2 {
		t.Fatalf("revoke: %d %v", n, err)
	}
	if code, _ := post(t, tok.MCPURL, tok.Token, "", init, nil); code != http.StatusUnauthorized {
		t.Errorf("revoked token: %d, want 401", code)
	}
	// Run ended.
	if err := r.srv.CancelRun(ctx, other, "tester", "test"); err != nil {
		t.Fatal(err)
	}
	if code, _ := post(t, otherTok.MCPURL, otherTok.Token, "", init, nil); code != http.StatusUnauthorized {
		t.Errorf("token of a cancelled run: %d, want 401", code)
	}
	if !slices.Contains(auditKinds(t, r, run), "agent.token-revoked") {
		t.Error("no agent.token-revoked record")
	}
}

// TestGatewayOrigin: a browser page of another origin, and a request whose
// Host is not the loopback server's (DNS rebinding), are refused before
// anything is read.
func TestGatewayOrigin(t *testing.T) {
	r := newRig(t, "")
	_, tok, _ := startAgentRun(t, r)
	init := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	for name, hdr := range map[string]map[string]string{
		"other origin":   {"Origin": "https://evil.example"},
		"null origin":    {"Origin": "null"},
		"rebinding host": {"Host": "evil.example:80"},
	} {
		if code, _ := post(t, tok.MCPURL, tok.Token, "", init, hdr); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, code)
		}
	}
	if code, _ := post(t, tok.MCPURL, tok.Token, "", init, map[string]string{"Origin": r.ts.URL}); code != http.StatusOK {
		t.Errorf("own origin: %d, want 200", code)
	}
}

// TestGatewayBoundary: names that are not, byte for byte, the step's
// allowed tools are refused through the decision path (audited as
// call.refused), the control tool refuses when no step waits, and a step's
// tools are gone once it ended.
func TestGatewayBoundary(t *testing.T) {
	r := newRig(t, "")
	run, _, a := startAgentRun(t, r)
	for _, name := range []string{"customer__get ", "customer__GET", "customer_get", "note__add\u200b", "mcp__memory__search_nodes", "customer.get.x", "*"} {
		if text, isErr := a.call(t, name, map[string]any{"customerId": "cus_ada"}); !isErr {
			t.Errorf("%q ran: %s", name, text)
		}
	}
	// The spec name itself is the allowed tool, named exactly.
	if _, isErr := a.call(t, "customer.get", map[string]any{"customerId": "cus_ada"}); isErr {
		t.Error("the spec name of an allowed tool was refused")
	}
	// Arguments the schema does not declare are refused.
	if _, isErr := a.call(t, "note__add", map[string]any{"customerId": "cus_ada", "body": "x", "extra": 1}); !isErr {
		t.Error("undeclared argument accepted")
	}
	refused := 0
	for _, k := range auditKinds(t, r, run) {
		if k == "call.refused" {
			refused++
		}
	}
	if refused < 8 {
		t.Errorf("%d call.refused records, want at least 8", refused)
	}
	if _, isErr := a.call(t, serve.FinishTool, map[string]any{}); !isErr {
		t.Error("finish without output accepted")
	}
	if _, isErr := a.call(t, serve.FinishTool, map[string]any{"output": 1}); isErr {
		t.Fatal("finish failed")
	}
	r.waitStatus(run, "waiting", "gate")
	if text, isErr := a.call(t, serve.FinishTool, map[string]any{"output": 2}); !isErr {
		t.Errorf("finish at a gate: %s", text)
	}
	if _, isErr := a.call(t, "customer__get", map[string]any{"customerId": "cus_ada"}); !isErr {
		t.Error("the ended step's tool ran at the gate")
	}
	if n := countNotes(t, r.st, "cus_ada"); n != 0 {
		t.Fatalf("%d notes", n)
	}
}

// TestGatewayResource: the agent reads the executing step (purpose,
// input) as a resource, and in the instructions.
func TestGatewayResource(t *testing.T) {
	r := newRig(t, "")
	run, _, a := startAgentRun(t, r)
	res, err := a.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "openplaybook://runs/" + run + "/step"})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Contents[0].Text
	if !strings.Contains(text, "Look up the customer") || !strings.Contains(text, "cus_ada") {
		t.Fatalf("step resource: %s", text)
	}
	if ins := a.cs.InitializeResult().Instructions; !strings.Contains(ins, serve.FinishTool) {
		t.Fatalf("instructions: %s", ins)
	}
}

// TestGatewaySessionBinding: an MCP session is used only under the run and
// the token that opened it: another run's agent that learned the session
// id cannot drive it, nor can a holder of another token of the same run.
func TestGatewaySessionBinding(t *testing.T) {
	r := newRig(t, "")
	ctx := context.Background()
	runA, tokA, a := startAgentRun(t, r)
	runB, _, err := r.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_grace"}`))
	if err != nil {
		t.Fatal(err)
	}
	r.waitStatus(runB, "waiting", "agent")
	tokB, err := r.srv.IssueAgentToken(ctx, runB, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	tokA2, err := r.srv.IssueAgentToken(ctx, runA, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	call := []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"note__add","arguments":{"customerId":"cus_ada","body":"hijacked"}}}`)
	if code, body := post(t, tokB.MCPURL, tokB.Token, a.cs.ID(), call, nil); code != http.StatusNotFound {
		t.Errorf("run B's token with run A's session: %d %s", code, body)
	}
	if code, body := post(t, tokA.MCPURL, tokA2.Token, a.cs.ID(), call, nil); code != http.StatusNotFound {
		t.Errorf("another token of run A with the session: %d %s", code, body)
	}
	if n := countNotes(t, r.st, "cus_ada"); n != 0 {
		t.Fatalf("%d notes added through a borrowed session", n)
	}
	_ = runA
}

// TestAgentScopedTokens: a token issued for one agent name serves only
// that agent's steps; the other agent's token is offered nothing while
// the first agent's step executes, and the reverse; a token for an agent
// the playbook does not have is refused.
func TestAgentScopedTokens(t *testing.T) {
	r := newRig(t, "")
	ctx := context.Background()
	run, ds, err := r.srv.CreateRun(ctx, "two-agents.json", readTestdata(t, "two-agents.json"), nil)
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")
	if _, err := r.srv.IssueAgentToken(ctx, run, "mallory", "tester"); err == nil || !strings.Contains(err.Error(), "researcher") {
		t.Fatalf("a token for an unknown agent: %v", err)
	}
	rt, err := r.srv.IssueAgentToken(ctx, run, "researcher", "tester")
	if err != nil {
		t.Fatal(err)
	}
	wt, err := r.srv.IssueAgentToken(ctx, run, "writer", "tester")
	if err != nil {
		t.Fatal(err)
	}
	writer := r.connect(wt.MCPURL, wt.Token)
	researcher := r.connect(rt.MCPURL, rt.Token)
	researcher.tools(t, "customer__get", serve.FinishTool)
	writer.tools(t, serve.FinishTool)
	if _, isErr := writer.call(t, "customer__get", map[string]any{"customerId": "cus_ada"}); !isErr {
		t.Fatal("the writer ran the researcher's tool")
	}
	if _, isErr := writer.call(t, serve.FinishTool, map[string]any{"output": "not mine"}); !isErr {
		t.Fatal("the writer finished the researcher's step")
	}
	if _, isErr := researcher.call(t, serve.FinishTool, map[string]any{"output": "Ada"}); isErr {
		t.Fatal("the researcher could not finish its step")
	}
	writer.tools(t, "note__add", serve.FinishTool)
	researcher.tools(t, serve.FinishTool)
	if _, isErr := researcher.call(t, "note__add", map[string]any{"customerId": "cus_ada", "body": "x"}); !isErr {
		t.Fatal("the researcher ran the writer's tool")
	}
	if _, isErr := writer.call(t, "note__add", map[string]any{"customerId": "cus_ada", "body": "written"}); isErr {
		t.Fatal("note.add failed")
	}
	if _, isErr := writer.call(t, serve.FinishTool, map[string]any{"output": "done"}); isErr {
		t.Fatal("finish failed")
	}
	r.waitStatus(run, "completed", "")
	if n := countNotes(t, r.st, "cus_ada"); n != 1 {
		t.Fatalf("%d notes, want 1", n)
	}
}
