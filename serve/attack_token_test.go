package serve_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/serve"
)

// TestAttackStdioRevokedToken: `openplaybook mcp` checks the agent token
// once, when it starts. An operator who revokes the token (or whose run's
// token expires) expects the agent to be refused from then on; the stdio
// session must stop serving calls.
func TestAttackStdioRevokedToken(t *testing.T) {
	r := newRig(t, "")
	ctx := context.Background()
	run, _, err := r.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatal(err)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	in, out, _ := stdioServer(t, r, run, tok.Token)
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-agent", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(bufio.NewReader(out)), Writer: in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	a := &agent{cs: cs, changed: make(chan struct{}, 1)}
	a.tools(t, "customer__get", "note__add", serve.FinishTool)

	if n, err := r.srv.RevokeAgentTokens(ctx, run, "", "tester"); err != nil || n != 1 {
		t.Fatalf("revoke: %d %v", n, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "note__add", Arguments: map[string]any{"customerId": "cus_ada", "body": "after revocation"}})
	if n := countNotes(t, r.st, "cus_ada"); n != 0 {
		t.Errorf("BROKEN: a revoked agent token still runs calls over stdio: %d note(s) added after revocation (result %v, err %v)", n, res, err)
	}
}

// TestAttackRevokeWhileWaitingForApproval: an agent's call waits for a
// person's approval; the operator revokes the agent's token, and once the
// store says it is revoked a person approves the call (for the agent
// that will be given a new token). The revoked agent's request must not
// be the one that runs it: nothing runs for a revoked token.
func TestAttackRevokeWhileWaitingForApproval(t *testing.T) {
	r, rec := approvalRig(t)
	ctx := context.Background()
	run, ds, err := r.srv.CreateRun(ctx, "approval.json", readTestdata(t, "approval.json"), nil)
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	a := r.connect(tok.MCPURL, tok.Token)
	a.tools(t, "charge__refund", "charge__get", "customer__get", serve.FinishTool)
	args := map[string]any{"chargeId": "ch_duplicate", "reason": "duplicate"}

	var wg sync.WaitGroup
	wg.Add(1)
	var answer string
	go func() {
		defer wg.Done()
		res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: "charge__refund", Arguments: args})
		if err != nil {
			answer = "error: " + err.Error()
			return
		}
		answer = res.Content[0].(*mcp.TextContent).Text
	}()
	id := waitApproval(t, r, run)
	// The operator revokes the token; once the store says it is revoked
	// (while RevokeAgentTokens closes the token's sessions), a person
	// approves the call.
	revoked := make(chan struct{})
	go func() {
		defer close(revoked)
		if n, err := r.srv.RevokeAgentTokens(ctx, run, "", "tester"); err != nil || n != 1 {
			t.Errorf("revoke: %d %v", n, err)
		}
	}()
	for {
		if _, err := serve.AgentToken(ctx, r.st, run, tok.Token); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := r.srv.Decide(ctx, run, id, runtime.Verdict{Approve: true, By: "tester"}); err != nil {
		t.Fatal(err)
	}
	<-revoked
	wg.Wait()
	waitHandlers(t, r, run, 3*time.Second)
	if n := refunds(rec); n != 0 {
		t.Errorf("BROKEN: the revoked agent's waiting request ran the approved refund (%d refund(s) reached Stripe after its token was revoked; it was answered %q)", n, answer)
	}
}

// waitHandlers waits until no call of the run's agent is in flight at
// the server or max has passed (what a handler still waiting does after
// its client is gone is what the test then counts).
func waitHandlers(t *testing.T, r *rig, run string, max time.Duration) {
	t.Helper()
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		if !handlerWaiting() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// handlerWaiting reports whether a gateway handler is waiting for a
// decision (a goroutine in waitDecision).
func handlerWaiting() bool {
	buf := make([]byte, 1<<20)
	n := goruntime.Stack(buf, true)
	return strings.Contains(string(buf[:n]), "serve.(*gateway).waitDecision") || strings.Contains(string(buf[:n]), "serve.(*gateway).dispatch")
}

// waitApproval waits until the run has a pending approval and returns
// its id.
func waitApproval(t *testing.T, r *rig, run string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ps, err := r.srv.Pending(context.Background(), run)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.Kind == "call" {
				return p.ID
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no approval was asked")
	return ""
}

// TestAttackCancelWhileWaitingForApproval: the run is cancelled while an
// agent's call waits for approval; an approval given then (the operator
// decides from a stale page) runs nothing.
func TestAttackCancelWhileWaitingForApproval(t *testing.T) {
	r, rec := approvalRig(t)
	ctx := context.Background()
	run, _, err := r.srv.CreateRun(ctx, "approval.json", readTestdata(t, "approval.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	a := r.connect(tok.MCPURL, tok.Token)
	a.tools(t, "charge__refund", "charge__get", "customer__get", serve.FinishTool)
	args := map[string]any{"chargeId": "ch_duplicate", "reason": "duplicate"}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = a.cs.CallTool(ctx, &mcp.CallToolParams{Name: "charge__refund", Arguments: args})
	}()
	id := waitApproval(t, r, run)
	if err := r.srv.CancelRun(ctx, run, "tester", "stop"); err != nil {
		t.Fatal(err)
	}
	_, _ = r.srv.Decide(ctx, run, id, runtime.Verdict{Approve: true, By: "tester"})
	wg.Wait()
	// Asked again (a new session cannot be opened: the token ended with
	// the run); the old session's call again.
	_, _ = a.cs.CallTool(ctx, &mcp.CallToolParams{Name: "charge__refund", Arguments: args})
	if n := refunds(rec); n != 0 {
		t.Errorf("BROKEN: %d refund(s) ran after the run was cancelled", n)
	}
	au, err := r.srv.Audit(ctx, run, true)
	if err != nil || !*au.Verified {
		t.Fatalf("audit: %v %+v", err, au.Problems)
	}
}

// TestAttackDisconnectWhileWaitingForApproval: the agent's HTTP request
// goes away while its call waits for approval, and a person approves it.
// docs/serve.md tells the agent to call again with the same arguments to
// learn the decision: that must give it the approved call's outcome (or
// run it then), so that one approved refund is one refund, never a
// second approval request for the same refund.
func TestAttackDisconnectWhileWaitingForApproval(t *testing.T) {
	r, rec := approvalRig(t)
	ctx := context.Background()
	run, _, err := r.srv.CreateRun(ctx, "approval.json", readTestdata(t, "approval.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	a := r.connect(tok.MCPURL, tok.Token)
	a.tools(t, "charge__refund", "charge__get", "customer__get", serve.FinishTool)
	sid := a.cs.ID()
	call := []byte(`{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"charge__refund","arguments":{"chargeId":"ch_duplicate","reason":"duplicate"}}}`)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(cctx, http.MethodPost, tok.MCPURL, strings.NewReader(string(call)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	id := waitApproval(t, r, run)
	cancel() // the client goes away
	<-done
	if _, err := r.srv.Decide(ctx, run, id, runtime.Verdict{Approve: true, By: "tester"}); err != nil {
		t.Fatal(err)
	}
	waitHandlers(t, r, run, 3*time.Second)
	ranForNobody := refunds(rec)
	// The agent, as docs/serve.md tells it, calls again with the same
	// arguments to learn the decision.
	args := map[string]any{"chargeId": "ch_duplicate", "reason": "duplicate"}
	text, _ := a.call(t, "charge__refund", args)
	if ranForNobody == 1 && strings.Contains(text, "pending") {
		// The refund ran for the client that was gone, and the agent is
		// asked to wait for a second approval of the same refund; a
		// person who approves it (it looks like the one they approved)
		// refunds twice.
		if second := approvalID(text); second != "" && second != id {
			if _, err := r.srv.Decide(ctx, run, second, runtime.Verdict{Approve: true, By: "tester"}); err != nil {
				t.Fatal(err)
			}
			a.call(t, "charge__refund", args)
		}
		t.Errorf("BROKEN: the approved refund ran in the handler of a client that had disconnected (its result went nowhere); the agent asking again to learn the decision was told %q, and approving that ran the refund again: %d refunds reached Stripe for one approved call", text, refunds(rec))
	} else if n := refunds(rec); n != 1 {
		t.Errorf("%d refunds after the approval and one ask (answer %q), want 1", n, text)
	}
	if _, isErr := a.call(t, serve.FinishTool, map[string]any{"output": "done"}); isErr {
		t.Fatal("finish failed")
	}
	r.waitStatus(run, "completed", "")
	au, err := r.srv.Audit(ctx, run, true)
	if err != nil || !*au.Verified {
		t.Fatalf("audit: %v %+v", err, au.Problems)
	}
}
