package serve_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

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
