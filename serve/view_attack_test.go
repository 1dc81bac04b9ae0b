package serve_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/openplaybook/openplaybook/runtime"
)

// startWaitingRefund starts a run of testdata/approval.json whose agent
// asks for a refund of chargeID, and returns the run, the agent and the
// id of the approval the refund waits for.
func startWaitingRefund(t *testing.T, r *rig, chargeID string) (string, *agent, string) {
	t.Helper()
	run, a := startApprovalRun(t, r)
	text, isErr := a.call(t, "charge__refund", map[string]any{"chargeId": chargeID, "reason": "duplicate"})
	if !isErr || !strings.Contains(text, "pending") {
		t.Fatalf("the refund: %q", text)
	}
	return run, a, approvalID(text)
}

// TestViewAttackConsole: the console's "Read TOOL now" form without the
// session's CSRF token, with another session's, with a cross-origin
// Origin, or without a session reads nothing at Stripe; the API view with
// the run's agent token, or for another run's path, reads nothing either.
// With the token it reads once. The secret of the harness is on no page
// or answer. Many views at once over HTTP, racing the decision while the
// run's agent calls another tool: the refund then runs once, and the used
// approval has no view.
func TestViewAttackConsole(t *testing.T) {
	r, rec := approvalRig(t)
	ctx := context.Background()
	run, a, id := startWaitingRefund(t, r, "ch_attack")
	b1, b2 := r.browser(), r.browser()
	b1.login()
	b2.login()
	anon := r.browser()
	path := "/runs/" + run + "/view"
	post := func(b *browser, form url.Values, origin string) page {
		req, _ := http.NewRequest(http.MethodPost, r.ts.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		return b.do(req)
	}
	fields := url.Values{"id": {id}, "tool": {"charge.get"}}
	with := func(csrf string) url.Values {
		f := url.Values{"id": fields["id"], "tool": fields["tool"]}
		if csrf != "" {
			f.Set("csrf", csrf)
		}
		return f
	}
	for name, p := range map[string]page{
		"no csrf":        post(b1, with(""), ""),
		"other's csrf":   post(b1, with(b2.csrf), ""),
		"wrong csrf":     post(b1, with(b1.csrf+"x"), ""),
		"cross origin":   post(b1, with(b1.csrf), "https://evil.example"),
		"no session":     post(anon, with(b1.csrf), ""),
		"operator token": post(anon, with(operatorToken), ""),
	} {
		if p.status == http.StatusOK {
			t.Errorf("BROKEN: %s: %d", name, p.status)
		}
	}
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	agentAPI := r.api(tok.Token)
	if res := agentAPI.do("POST", "/api/v1/runs/"+run+"/approvals/"+id+"/view", map[string]any{"tool": "charge.get"}); res.status == 200 {
		t.Errorf("BROKEN: the agent token read a view: %d %s", res.status, res.body)
	}
	if n := chargeReads(rec, "ch_attack"); n != 0 {
		t.Fatalf("BROKEN: %d charge reads after refused views, want 0", n)
	}

	p := post(b1, with(b1.csrf), "")
	if p.status != http.StatusOK || !strings.Contains(p.body, `class="viewed"`) || !strings.Contains(p.body, "ch_attack") {
		t.Fatalf("the view with the session's token: %d\n%s", p.status, p.body)
	}
	if strings.Contains(p.body, "sk_test_serve") {
		t.Errorf("BROKEN: the view page shows the Stripe key")
	}
	if n := chargeReads(rec, "ch_attack"); n != 1 {
		t.Errorf("%d charge reads, want 1", n)
	}

	api := r.api(operatorToken)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range 8 {
		wg.Go(func() {
			res := api.do("POST", "/api/v1/runs/"+run+"/approvals/"+id+"/view", map[string]any{"tool": "charge.get", "by": "ada"})
			if strings.Contains(string(res.body), "sk_test_serve") {
				t.Errorf("BROKEN: an API view answer shows the Stripe key")
			}
			mu.Lock()
			if res.status == 200 {
				ok++
			} else if res.status != 409 {
				t.Errorf("a view racing the decision: %d %s", res.status, res.body)
			}
			mu.Unlock()
		})
	}
	// The run's agent calls another tool meanwhile.
	var agentText []string
	wg.Go(func() {
		for range 3 {
			text, _ := a.call(t, "customer__get", map[string]any{"customerId": "cus_attack"})
			agentText = append(agentText, text)
		}
	})
	if _, err := r.srv.Decide(ctx, run, id, runtime.Verdict{Approve: true, By: "ada", Reason: "checked"}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, text := range agentText {
		if strings.Contains(text, "view") || strings.Contains(text, "refused") {
			t.Errorf("the agent's own call during the views: %q", text)
		}
	}
	// The approved refund, asked again, runs once; its views are over.
	if text, isErr := a.call(t, "charge__refund", map[string]any{"chargeId": "ch_attack", "reason": "duplicate"}); isErr {
		t.Fatalf("the approved refund: %q", text)
	}
	if res := api.do("POST", "/api/v1/runs/"+run+"/approvals/"+id+"/view", map[string]any{"tool": "charge.get"}); res.status != 409 {
		t.Errorf("a view of a used approval: %d %s, want 409", res.status, res.body)
	}
	if n := chargeReads(rec, "ch_attack"); n != 1+ok {
		t.Errorf("%d charge reads, want %d (1 + the views that answered)", n, 1+ok)
	}
	au, err := r.srv.Audit(ctx, run, true)
	if err != nil || au.Verified == nil || !*au.Verified {
		t.Fatalf("audit after the views: %+v %v", au.Problems, err)
	}
	for _, x := range au.Records {
		if strings.Contains(string(x.Data), "sk_test_serve") {
			t.Errorf("BROKEN: audit record %d holds the Stripe key", x.Seq)
		}
	}
	if n := refunds(rec); n != 1 {
		t.Errorf("%d refunds, want 1", n)
	}
}

// TestViewAttackOIDC: with serve.oidc, the operator token and a person
// who is not a decider get 403 from the view endpoint before any approval
// is looked up (so nothing can be read); a decider's unknown approval is
// a 409.
func TestViewAttackOIDC(t *testing.T) {
	ir := newIdentityRig(t, "")
	aliceAPI := ir.api(ir.token(alice, apiAudience))
	run := ir.startGateRun(aliceAPI)
	path := "/api/v1/runs/" + run + "/approvals/apr_0000000000000000/view"
	body := map[string]any{"tool": "charge.get", "by": "bob"}
	want(t, "the operator token views", ir.api(operatorToken).do("POST", path, body), 403, "operator token does not")
	want(t, "carol is not a decider", ir.api(ir.token(carol, apiAudience)).do("POST", path, body), 403, "not one of serve.oidc.deciders")
	want(t, "bob views an unknown approval", ir.api(ir.token(bob, apiAudience)).do("POST", path, body), 409)
}
