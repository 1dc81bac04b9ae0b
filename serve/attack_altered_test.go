package serve_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/internal/teststore"
)

// TestAttackAlteredApprovalArguments: another process rewrites the
// arguments of a call waiting for approval in SQLite, to show the
// approver harmless values. The console's approvals page and the API's
// pending list show the tamper verdict, not the edited arguments, and
// no approve button; an approve through the API is refused (409), and
// nothing reaches Stripe.
func TestAttackAlteredApprovalArguments(t *testing.T) {
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
	text, _ := a.call(t, "charge__refund", map[string]any{"chargeId": "ch_duplicate", "reason": "duplicate"})
	id := approvalID(text)
	if id == "" {
		t.Fatalf("first ask: %q", text)
	}
	if n := teststore.Int(t, r.h, `SELECT count(*) FROM calls WHERE run = ? AND state = 'waiting'`, run); n != 1 {
		t.Fatalf("%d waiting calls, want 1", n)
	}
	teststore.Exec(t, r.h, `UPDATE calls SET args = '{"chargeId":"ch_harmless","reason":"duplicate"}' WHERE run = ? AND state = 'waiting'`, run)

	b := r.browser()
	b.login()
	p := b.get("/approvals")
	if !strings.Contains(p.body, "disagree with the run's audit log") || strings.Contains(p.body, "ch_harmless") {
		t.Errorf("the approvals page shows the edited arguments or no verdict:\n%s", p.body)
	}
	if i := strings.Index(p.body, `id="p-`+id+`"`); i < 0 || strings.Contains(p.body[i:], `value="approve"`) {
		t.Errorf("the approvals page offers to approve %s", id)
	}
	c := r.api(operatorToken)
	pend := c.do("GET", "/api/v1/runs/"+run+"/pending", nil)
	want(t, "pending", pend, 200, `"altered"`, "the store was altered")
	if strings.Contains(string(pend.body), "ch_harmless") {
		t.Errorf("the pending list shows the edited arguments: %s", pend.body)
	}
	want(t, "approve", c.do("POST", "/api/v1/runs/"+run+"/decisions/"+id, map[string]any{"approve": true, "by": "bob"}), 409, "the store was altered")
	if n := refunds(rec); n != 0 {
		t.Errorf("%d refunds reached Stripe", n)
	}
}
