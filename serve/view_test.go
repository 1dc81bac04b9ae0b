package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/openplaybook/openplaybook/runtime"
)

// TestAPIView: a refund waiting for approval lists charge.get among its
// views; POST .../approvals/{id}/view reads the charge once at Stripe and
// answers what it gave, with the view.read record's sequence number. A
// tool that is not one of the views (the refund itself, a name one byte
// off, a read of another target), an unknown approval and a decided one
// are refused with 409 and nothing reaches Stripe.
func TestAPIView(t *testing.T) {
	r, rec := approvalRig(t)
	ctx := context.Background()
	run, _, id := startWaitingRefund(t, r, "ch_viewed")
	api := r.api(operatorToken)

	res := api.do("GET", "/api/v1/runs/"+run+"/pending", nil)
	var pend struct {
		Pending []struct {
			ID    string   `json:"id"`
			Views []string `json:"views"`
		} `json:"pending"`
	}
	if err := json.Unmarshal(res.body, &pend); err != nil || len(pend.Pending) != 1 || pend.Pending[0].ID != id || strings.Join(pend.Pending[0].Views, ",") != "charge.get" {
		t.Fatalf("pending: %s (%v)", res.body, err)
	}

	path := "/api/v1/runs/" + run + "/approvals/" + id + "/view"
	for _, tool := range []string{"charge.refund", "customer.get", "charge.get ", "charge.Get", "charge.get\u200b", ""} {
		if res := api.do("POST", path, map[string]any{"tool": tool}); res.status != 409 {
			t.Errorf("view with %q: %d %s, want 409", tool, res.status, res.body)
		}
	}
	if res := api.do("POST", "/api/v1/runs/"+run+"/approvals/apr_0000000000000000/view", map[string]any{"tool": "charge.get"}); res.status != 409 {
		t.Errorf("view of an unknown approval: %d %s, want 409", res.status, res.body)
	}
	if res := api.do("POST", path, map[string]any{}); res.status != 400 {
		t.Errorf("view without a tool: %d %s, want 400", res.status, res.body)
	}
	if n := chargeReads(rec, "ch_viewed"); n != 0 {
		t.Fatalf("%d reads of the charge after refused views, want 0", n)
	}

	res = api.do("POST", path, map[string]any{"tool": "charge.get", "by": "ada"})
	var v struct {
		Tool   string `json:"tool"`
		Result struct {
			ID string `json:"id"`
		} `json:"result"`
		Seq int64 `json:"seq"`
	}
	if res.status != 200 || json.Unmarshal(res.body, &v) != nil || v.Tool != "charge.get" || v.Result.ID != "ch_viewed" || v.Seq == 0 {
		t.Fatalf("view: %d %s", res.status, res.body)
	}
	if n := chargeReads(rec, "ch_viewed"); n != 1 {
		t.Errorf("%d reads of the charge reached Stripe, want 1", n)
	}
	au, err := r.srv.Audit(ctx, run, true)
	if err != nil || au.Verified == nil || !*au.Verified {
		t.Fatalf("audit after the view: %+v %v", au.Problems, err)
	}
	found := false
	for _, x := range au.Records {
		if x.Seq == v.Seq && x.Kind == "view.read" && x.Tool == "charge.get" && strings.Contains(string(x.Data), `"by":"ada"`) {
			found = true
		}
	}
	if !found {
		t.Errorf("no view.read record %d by ada", v.Seq)
	}
	if n := refunds(rec); n != 0 {
		t.Errorf("%d refunds before the decision, want 0", n)
	}

	if _, err := r.srv.Decide(ctx, run, id, runtime.Verdict{Approve: false, By: "ada", Reason: "not a duplicate"}); err != nil {
		t.Fatal(err)
	}
	if res := api.do("POST", path, map[string]any{"tool": "charge.get"}); res.status != 409 {
		t.Errorf("view after the denial: %d %s, want 409", res.status, res.body)
	}
	if n := chargeReads(rec, "ch_viewed"); n != 1 {
		t.Errorf("%d reads of the charge, want still 1", n)
	}
}

// TestAPIPendingMine: GET .../pending?mine=true keeps what the caller may
// approve now. With the operator token (no serve.oidc) that is every
// approval except one a policy rule names deciders for, which only a
// verified person decides.
func TestAPIPendingMine(t *testing.T) {
	rec := stripemock.Proxy(t, stripemock.Start(t))
	t.Setenv("STRIPE_API_KEY", "sk_test_serve")
	r := newRig(t, `connections:
  stripe:
    authKind: api_token
    secrets: {apiKey: STRIPE_API_KEY}
    baseURL: `+rec.URL+`
policy:
  rules:
    - name: big-refunds
      tools: [charge.refund]
      when: has(args.amount) && args.amount > 10000
      effect: requireApproval
      deciders: {groups: [finance]}
`)
	ids := map[string]string{}
	for _, amount := range []int{500, 50000} {
		_, a := startApprovalRun(t, r)
		text, isErr := a.call(t, "charge__refund", map[string]any{"chargeId": "ch_mine", "amount": amount, "reason": "duplicate"})
		if !isErr || !strings.Contains(text, "pending") {
			t.Fatalf("refund of %d: %q", amount, text)
		}
		ids[approvalID(text)] = fmt.Sprint(amount)
	}
	api := r.api(operatorToken)
	list := func(q string) []string {
		t.Helper()
		res := api.do("GET", "/api/v1/pending"+q, nil)
		var p struct {
			Pending []struct {
				ID string `json:"id"`
			} `json:"pending"`
		}
		if res.status != 200 || json.Unmarshal(res.body, &p) != nil {
			t.Fatalf("pending%s: %d %s", q, res.status, res.body)
		}
		var out []string
		for _, it := range p.Pending {
			out = append(out, ids[it.ID])
		}
		slices.Sort(out)
		return out
	}
	if got := list(""); !slices.Equal(got, []string{"500", "50000"}) {
		t.Errorf("pending: %v, want both refunds", got)
	}
	if got := list("?mine=true"); !slices.Equal(got, []string{"500"}) {
		t.Errorf("pending?mine=true with the operator token: %v, want only the refund no rule names deciders for", got)
	}
	if got := list("?mine=0"); !slices.Equal(got, []string{"500", "50000"}) {
		t.Errorf("pending?mine=0: %v, want both", got)
	}
}
