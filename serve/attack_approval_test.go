package serve_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/serve"
)

// TestAttackApprovalIDOfAnotherCall: two calls of the same tool wait for
// approval at once, with other arguments. Each is answered "pending" with
// an approval id; that id must be the approval of that call (its
// arguments), not of the other one: an agent relays it to a person ("please
// approve apr_..."), and the gateway's own approval loop follows it.
func TestAttackApprovalIDOfAnotherCall(t *testing.T) {
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
	charges := []string{"ch_first", "ch_second"}
	answers := make([]string, len(charges))
	var wg sync.WaitGroup
	for i, ch := range charges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], _ = a.call(t, "charge__refund", map[string]any{"chargeId": ch, "reason": "duplicate"})
		}()
	}
	wg.Wait()
	pend, err := r.srv.Pending(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	argsOf := map[string]string{}
	for _, p := range pend {
		argsOf[p.ID] = string(p.Arguments)
	}
	for i, ch := range charges {
		id := approvalID(answers[i])
		if !strings.Contains(argsOf[id], ch) {
			t.Errorf("BROKEN (misleading, low): the call refunding %s was told it waits for %s, which is the approval of %s", ch, id, argsOf[id])
		}
	}
	// Whatever the ids said, a person's approval of one runs only that one.
	for _, p := range pend {
		if strings.Contains(string(p.Arguments), "ch_first") {
			if _, err := r.srv.Decide(ctx, run, p.ID, runtime.Verdict{Approve: true, By: "tester"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	a.call(t, "charge__refund", map[string]any{"chargeId": "ch_first", "reason": "duplicate"})
	if n := refunds(rec); n != 1 {
		t.Errorf("%d refunds after ch_first's approval was used, want 1", n)
	}
	if pend, _ := r.srv.Pending(ctx, run); len(pend) != 1 || !strings.Contains(string(pend[0].Arguments), "ch_second") {
		t.Errorf("pending after ch_first ran: %+v", pend)
	}
}
