package serve_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/serve"
)

// TestStricterDocumentIsAccepted: the console's way in (CreateRun) takes a
// document that asks for approval of note.add, whose registry entry
// says requiresApproval false, and the run asks a person before the call
// runs; a document without the approval the registry requires of
// charge.refund is refused, with the drift error at that tool.
func TestStricterDocumentIsAccepted(t *testing.T) {
	r, rec := approvalRig(t)
	ctx := context.Background()
	const approvalFalse, approvalTrue = `"requiresApproval": false`, `"requiresApproval": true`
	agent := string(readTestdata(t, "agent.json"))
	at := strings.Index(agent, `"name": "note.add"`)
	i := strings.Index(agent[at:], approvalFalse)
	if at < 0 || i < 0 {
		t.Fatal("test setup: agent.json has changed")
	}
	strict := agent[:at+i] + approvalTrue + agent[at+i+len(approvalFalse):]
	run, ds, err := r.srv.CreateRun(ctx, "strict.json", []byte(strict), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("a document stricter than the registry is refused: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	a := r.connect(tok.MCPURL, tok.Token)
	a.tools(t, "customer__get", "note__add", serve.FinishTool)
	note := map[string]any{"customerId": "cus_ada", "body": "asked for approval"}
	text, isErr := a.call(t, "note__add", note)
	if !isErr || !strings.Contains(text, "pending") || !strings.Contains(text, "apr_") {
		t.Fatalf("note.add, which the document says needs approval: %q (isError %v)", text, isErr)
	}
	if n := countNotes(t, r.st, "cus_ada"); n != 0 {
		t.Fatalf("%d notes before the approval", n)
	}
	id := approvalID(text)
	if _, err := r.srv.Decide(ctx, run, id, runtime.Verdict{Approve: true, By: "tester"}); err != nil {
		t.Fatalf("approving %s: %v", id, err)
	}
	if text, isErr := a.call(t, "note__add", note); isErr {
		t.Fatalf("note.add once approved: %q", text)
	}
	if n := countNotes(t, r.st, "cus_ada"); n != 1 {
		t.Fatalf("%d notes after the approval, want 1", n)
	}

	src := string(readTestdata(t, "approval.json"))
	if strings.Count(src, approvalTrue) != 1 {
		t.Fatal("test setup: approval.json has changed")
	}
	lax := strings.Replace(src, approvalTrue, approvalFalse, 1)
	_, ds, err = r.srv.CreateRun(ctx, "lax.json", []byte(lax), nil)
	found := false
	for _, d := range ds {
		found = found || d.Rule == "drift-requires-approval" && d.Pointer == "/tools/1/requiresApproval" && strings.Contains(d.Message, "understates")
	}
	if err == nil || !found {
		t.Errorf("a document without the approval the registry requires: err %v, diagnostics %v", err, ds)
	}
	if n := refunds(rec); n != 0 {
		t.Errorf("%d refunds", n)
	}
}
