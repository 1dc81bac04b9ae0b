package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

func readExample(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mcptest.RepoRoot(t), "examples", rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantCall is one expected call row.
type wantCall struct {
	step, tool string
	state      store.CallState
}

func checkCalls(t *testing.T, got []store.Call, want []wantCall) {
	t.Helper()
	var g, w []string
	for _, c := range got {
		g = append(g, c.Step+" "+c.Tool+" "+string(c.State))
	}
	for _, c := range want {
		w = append(w, c.step+" "+c.tool+" "+string(c.state))
	}
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Errorf("calls in the store:\n  %s\nwant:\n  %s", strings.Join(g, "\n  "), strings.Join(w, "\n  "))
		for _, c := range got {
			if c.State != store.CallSucceeded {
				t.Logf("%s %s: %s %s", c.Step, c.Tool, c.Reason, c.Error)
			}
		}
	}
}

func auditKinds(recs []audit.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Kind)
	}
	return out
}

func auditHas(recs []audit.Record, kind, tool string) bool {
	for _, r := range recs {
		if r.Kind == kind && (tool == "" || r.Tool == tool) {
			return true
		}
	}
	return false
}

// TestExamplesEndToEnd runs the bundled support-triage and refund-review
// with their bundled transcripts against the built-ins, server-memory
// (stdio) and the Stripe connector on stripe-mock, deciding gates and the
// charge.refund approval as a person would, each resume in a fresh engine
// as `openplaybook resume` would build it.
func TestExamplesEndToEnd(t *testing.T) {
	t.Parallel()
	url, stripe := stripeMock(t)
	triageDoc, refundDoc := readExample(t, "support-triage.json"), readExample(t, "refund-review.json")
	r := newRig(t, rigConfig{memory: true, stripe: url, secrets: map[string]string{"STRIPE_API_KEY": "sk_test_123"}}, triageDoc, refundDoc)
	trs := map[string]string{
		"triage": string(readExample(t, "transcripts/triage.json")),
		"rita":   string(readExample(t, "transcripts/rita.json")),
	}
	ctx := context.Background()
	preflightRequests := stripe.Count() // the connection check

	// support-triage: identify, recall, classify, then the escalation gate.
	out, err := r.engine(0, trs, nil, nil).Start(ctx, jsontext.Value(`{"fromEmail":"ada@analytical.example","subject":"Export times out","body":"The CSV export times out."}`))
	wantOutcome(t, "support-triage start", out, err, runtime.Waiting)
	if len(out.Waiting) != 1 || out.Waiting[0].Kind != "gate" || out.Waiting[0].ID != "escalate_gate" {
		t.Fatalf("support-triage waits for %+v, want the gate escalate_gate", out.Waiting)
	}
	triage := out.Run
	r.mustDecide(triage, "escalate_gate", true)
	out, err = r.engine(0, trs, nil, nil).Resume(ctx, triage)
	wantOutcome(t, "support-triage resume", out, err, runtime.Completed)
	checkCalls(t, r.calls(triage), []wantCall{
		{"identify", "customer.search", store.CallSucceeded},
		{"identify", "customer.get", store.CallSucceeded},
		{"identify", "note.list", store.CallSucceeded},
		{"recall", "mcp.memory.search_nodes", store.CallSucceeded},
		{"recall", "mcp.memory.open_nodes", store.CallSucceeded},
		{"classify", "note.add", store.CallSucceeded},
		{"classify", "mcp.memory.create_entities", store.CallSucceeded},
		{"escalate", "today.surface", store.CallSucceeded},
	})
	recs := r.auditOf(triage)
	if k := auditKinds(recs); k[0] != "run.created" || k[len(k)-1] != "run.completed" || !auditHas(recs, "gate.approved", "") {
		t.Errorf("support-triage audit kinds: %v", k)
	}
	items, err := r.st.ListToday(ctx, false)
	if err != nil || len(items) != 1 || !strings.Contains(items[0].Title, "CSV export") || items[0].Run != triage {
		t.Errorf("today items: %+v %v", items, err)
	}

	// refund-review: review, the gate, then the refund, which waits for
	// its own approval before Stripe sees anything.
	out, err = r.engine(1, trs, nil, nil).Start(ctx, jsontext.Value(`{"customerId":"cus_ada","chargeId":"ch_duplicate","message":"I was charged twice."}`))
	wantOutcome(t, "refund-review start", out, err, runtime.Waiting)
	refund := out.Run
	if len(out.Waiting) != 1 || out.Waiting[0].ID != "approve_refund" {
		t.Fatalf("refund-review waits for %+v, want the gate approve_refund", out.Waiting)
	}
	r.mustDecide(refund, "approve_refund", true)
	out, err = r.engine(1, trs, nil, nil).Resume(ctx, refund)
	wantOutcome(t, "refund-review resume after the gate", out, err, runtime.Waiting)
	if len(out.Waiting) != 1 || out.Waiting[0].Kind != "call" || out.Waiting[0].Tool != "charge.refund" || out.Waiting[0].Step != "refund" {
		t.Fatalf("refund-review waits for %+v, want the approval of charge.refund", out.Waiting)
	}
	if n := refundPosts(stripe); n != 0 {
		t.Fatalf("Stripe received %d refund requests before the approval", n)
	}
	r.mustDecide(refund, out.Waiting[0].ID, true)
	out, err = r.engine(1, trs, nil, nil).Resume(ctx, refund)
	wantOutcome(t, "refund-review resume after the approval", out, err, runtime.Completed)
	checkCalls(t, r.calls(refund), []wantCall{
		{"review", "customer.get", store.CallSucceeded},
		{"review", "billing_customer.get", store.CallSucceeded},
		{"review", "charge.history", store.CallSucceeded},
		{"review", "invoice.list", store.CallSucceeded},
		{"review", "mcp.memory.search_nodes", store.CallSucceeded},
		{"review", "note.add", store.CallSucceeded},
		{"refund", "charge.refund", store.CallSucceeded},
		{"refund", "note.add", store.CallSucceeded},
		{"refund", "mcp.memory.add_observations", store.CallSucceeded},
	})
	if n := refundPosts(stripe); n != 1 {
		t.Errorf("Stripe received %d refund requests, want exactly 1", n)
	}
	for _, req := range stripe.Requests() {
		if req.Method == "POST" && req.Path == "/v1/refunds" {
			if k := req.Header.Get("Idempotency-Key"); !strings.HasPrefix(k, "opb_") {
				t.Errorf("the refund was sent with Idempotency-Key %q, want the runtime's opb_ key", k)
			}
			if f := req.Form(); f.Get("charge") != "ch_duplicate" || f.Get("reason") != "duplicate" {
				t.Errorf("the refund was sent with %s", req.Body)
			}
		}
	}
	recs = r.auditOf(refund)
	for _, k := range []string{"approval.requested", "approval.approved", "gate.waiting", "gate.approved", "run.completed"} {
		if !auditHas(recs, k, "") {
			t.Errorf("refund-review audit has no %s: %v", k, auditKinds(recs))
		}
	}
	// Every request Stripe received after the preflight check came from a
	// call the store recorded as succeeded: charge.history makes two.
	if got := stripe.Count() - preflightRequests; got != 5 {
		t.Errorf("Stripe received %d requests during the run, want 5 (billing_customer.get, charge.history x2, invoice.list, charge.refund)", got)
	}
}

func refundPosts(rec *stripemock.Recorder) int {
	n := 0
	for _, r := range rec.Requests() {
		if r.Method == "POST" && r.Path == "/v1/refunds" {
			n++
		}
	}
	return n
}
