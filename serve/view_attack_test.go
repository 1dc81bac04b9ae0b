package serve_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/openplaybook/openplaybook/internal/stripemock"
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

// TestViewAttackHostileCharge: Stripe answers the view's charge read with
// markup in the charge's description and the harness's Stripe key in its
// failure message: the console's page shows the markup as text and
// neither the page, the API answer nor the audit log holds the key.
func TestViewAttackHostileCharge(t *testing.T) {
	rec := stripemock.Proxy(t, stripemock.Start(t))
	up, _ := url.Parse(rec.URL)
	rp := httputil.NewSingleHostReverseProxy(up)
	rp.ModifyResponse = func(res *http.Response) error {
		if res.Request.Method != "GET" || !strings.HasPrefix(res.Request.URL.Path, "/v1/charges/ch_evil") {
			return nil
		}
		var m map[string]any
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		m["description"] = `</pre><script>alert(1)</script><img src=x onerror=alert(2)>`
		m["failure_message"] = "declined for key sk_test_serve"
		b, _ = json.Marshal(m)
		res.Body = io.NopCloser(bytes.NewReader(b))
		res.ContentLength = int64(len(b))
		res.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	front := httptest.NewServer(rp)
	t.Cleanup(front.Close)
	t.Setenv("STRIPE_API_KEY", "sk_test_serve")
	r := newRig(t, "connections:\n  stripe:\n    authKind: api_token\n    secrets: {apiKey: STRIPE_API_KEY}\n    baseURL: "+front.URL+"\n")
	run, _, id := startWaitingRefund(t, r, "ch_evil")
	b := r.browser()
	b.login()
	p := b.post("/runs/"+run+"/view", b.form("id", id, "tool", "charge.get"))
	if p.status != http.StatusOK || !strings.Contains(p.body, "&lt;script&gt;alert(1)") {
		t.Fatalf("the view page: %d, want the markup as text\n%s", p.status, p.body)
	}
	if strings.Contains(p.body, "<script>alert") || strings.Contains(p.body, "<img src=x") {
		t.Errorf("BROKEN: the view page holds the charge's markup as markup")
	}
	res := r.api(operatorToken).do("POST", "/api/v1/runs/"+run+"/approvals/"+id+"/view", map[string]any{"tool": "charge.get"})
	if res.status != 200 || !strings.Contains(string(res.body), "alert(1)") {
		t.Fatalf("the API view: %d %s", res.status, res.body)
	}
	if !strings.Contains(string(res.body), "declined for key") {
		t.Errorf("the API view lacks the failure message: %s", res.body)
	}
	for what, s := range map[string]string{"page": p.body, "API answer": string(res.body)} {
		if strings.Contains(s, "sk_test_serve") {
			t.Errorf("BROKEN: the %s holds the Stripe key", what)
		}
	}
	if n := chargeReads(rec, "ch_evil"); n != 2 {
		t.Errorf("%d charge reads, want 2", n)
	}
	au, err := r.srv.Audit(context.Background(), run, true)
	if err != nil || au.Verified == nil || !*au.Verified {
		t.Fatalf("audit: %+v %v", au.Problems, err)
	}
	for _, x := range au.Records {
		if strings.Contains(string(x.Data), "sk_test_serve") {
			t.Errorf("BROKEN: audit record %d holds the Stripe key", x.Seq)
		}
	}
}
