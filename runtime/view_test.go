package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/openplaybook/openplaybook/runtime"
)

// viewDoc: step refund may call charge.refund (requiresApproval),
// charge.get and charge.history (Stripe reads), mcp.ctr.lookup (a read
// of another server) and note.add.
func viewDoc(t *testing.T) []byte {
	return buildDoc(t, "view",
		agentStep("refund", "lou", []string{"charge.refund", "charge.get", "charge.history", "mcp.ctr.lookup", "note.add"}, ""),
	)
}

// chargeReads counts the GET /v1/charges/ID requests Stripe received.
func chargeReads(rec *stripemock.Recorder, id string) int {
	n := 0
	for _, r := range rec.Requests() {
		if r.Method == "GET" && r.Path == "/v1/charges/"+id {
			n++
		}
	}
	return n
}

func countKind(recs []runtimeRecord, kind string) int {
	n := 0
	for _, r := range recs {
		if r.Kind == kind {
			n++
		}
	}
	return n
}

type runtimeRecord = struct {
	Kind, Tool string
	Data       []byte
}

// TestViewCurrentTarget: a person deciding a refund reads the charge's
// current state with charge.get, the one Stripe read of the step whose
// required arguments the refund has: one request reaches Stripe, it is
// recorded as view.read (who asked, the digests), and the step's calls
// and the refund are untouched. Every other name (the refund itself, a
// read of another target or server, a name one byte off) is refused
// before anything is sent, as is a view once the approval is decided.
func TestViewCurrentTarget(t *testing.T) {
	t.Parallel()
	w := startWaitingRefund(t, "ch_dup")
	r, rec, ctr, s, tr, run, apr := w.r, w.rec, w.ctr, w.s, w.tr, w.run, w.apr
	ctx := context.Background()

	views := runtime.ViewTools(s.Imported().Doc, "refund", "charge.refund", jsonOf(map[string]any{"chargeId": "ch_dup", "amount": 1500, "reason": "duplicate"}))
	if len(views) != 1 || views[0].Name != "charge.get" || string(views[0].Arguments) != `{"chargeId":"ch_dup"}` {
		t.Fatalf("ViewTools = %+v, want charge.get with {\"chargeId\":\"ch_dup\"}", views)
	}

	records := func() []runtimeRecord {
		var out []runtimeRecord
		for _, x := range r.auditOf(run) {
			out = append(out, runtimeRecord{x.Kind, x.Tool, x.Data})
		}
		return out
	}
	callsBefore := len(r.calls(run))
	for _, name := range []string{"charge.refund", "charge.history", "mcp.ctr.lookup", "note.add", "charge.get ", " charge.get", "Charge.get", "charge.get\x00", "charge.ge", "mcp.stripe.charge.get", ""} {
		if _, err := s.View(ctx, run, apr.ID, name, "alice"); !errors.Is(err, runtime.ErrNotViewable) {
			t.Errorf("View with %q: %v, want ErrNotViewable", name, err)
		}
	}
	if _, err := s.View(ctx, run, "apr_0000000000000000", "charge.get", "alice"); !errors.Is(err, runtime.ErrNotViewable) {
		t.Errorf("View of an unknown approval: %v, want ErrNotViewable", err)
	}
	if _, err := s.View(ctx, "run_0000000000000000", apr.ID, "charge.get", "alice"); !errors.Is(err, runtime.ErrNotViewable) {
		t.Errorf("View of the approval under another run: %v, want ErrNotViewable", err)
	}
	if n := len(rec.Requests()); chargeReads(rec, "ch_dup") != 0 || ctr.calls() != 0 {
		t.Fatalf("a refused view reached a server: %d Stripe requests (%d charge reads), ctr %s", n, chargeReads(rec, "ch_dup"), ctr)
	}
	if n := countKind(records(), "view.read"); n != 0 {
		t.Fatalf("%d view.read records after refused views, want 0", n)
	}

	v, err := s.View(ctx, run, apr.ID, "charge.get", "alice")
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	var charge struct {
		ID       string `json:"id"`
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
	}
	if v.Error != "" || json.Unmarshal(v.Result, &charge) != nil || !strings.HasPrefix(charge.ID, "ch_") || charge.Currency == "" {
		t.Fatalf("View = %+v, want a charge", v)
	}
	if n := chargeReads(rec, "ch_dup"); n != 1 {
		t.Errorf("%d reads of ch_dup reached Stripe, want 1", n)
	}
	if n := refundPosts(rec); n != 0 {
		t.Errorf("%d refunds reached Stripe before the decision, want 0", n)
	}
	if n := len(r.calls(run)); n != callsBefore {
		t.Errorf("the view added call rows: %d, was %d", n, callsBefore)
	}
	var viewRec *runtimeRecord
	for _, x := range records() {
		if x.Kind == "view.read" {
			viewRec = &x
		}
	}
	if viewRec == nil || viewRec.Tool != "charge.get" {
		t.Fatalf("no view.read record of charge.get: %v", records())
	}
	var ev runtime.ViewRead
	if err := json.Unmarshal(viewRec.Data, &ev); err != nil || ev.Approval != apr.ID || ev.By != "alice" || ev.ArgsDigest == "" || ev.ResultDigest == "" {
		t.Errorf("view.read = %s (%v)", viewRec.Data, err)
	}
	if probs, err := r.st.VerifyAudit(ctx, run); err != nil || len(probs) > 0 {
		t.Fatalf("the chain after the view: %v %v", err, probs)
	}

	// The refund is decided and runs once; its view is then refused.
	r.mustDecide(run, apr.ID, true)
	out, err := r.engine(0, tr, nil, nil).Resume(ctx, run)
	wantOutcome(t, "resume", out, err, runtime.Completed)
	if n := refundPosts(rec); n != 1 {
		t.Errorf("%d refunds reached Stripe after the approval, want 1", n)
	}
	if _, err := s.View(ctx, run, apr.ID, "charge.get", "alice"); !errors.Is(err, runtime.ErrNotViewable) {
		t.Errorf("View after the decision: %v, want ErrNotViewable", err)
	}
	if n := chargeReads(rec, "ch_dup"); n != 1 {
		t.Errorf("%d reads of ch_dup reached Stripe, want still 1", n)
	}
}

// TestViewPolicyRefuses: a harness policy rule that denies the read tool,
// or asks for approval of it, refuses the view: nothing reaches Stripe,
// nothing is recorded.
func TestViewPolicyRefuses(t *testing.T) {
	t.Parallel()
	for _, effect := range []string{"deny", "requireApproval"} {
		t.Run(effect, func(t *testing.T) {
			url, rec := stripeMock(t)
			ctr := startCtr(t, true)
			cfg := rigConfig{stripe: url, http: map[string]string{"ctr": ctr.URL}, secrets: map[string]string{"STRIPE_API_KEY": "sk_test_123"},
				policy: map[string]any{"rules": []any{map[string]any{"name": "no-peeking", "tools": []any{"charge.get"}, "effect": effect}}}}
			r := newRig(t, cfg, viewDoc(t))
			ctx := context.Background()
			tr := map[string]string{"lou": transcriptOf(map[string][]tcall{"refund": {
				{"charge.refund", map[string]any{"chargeId": "ch_dup", "reason": "duplicate"}},
			}})}
			s := r.engine(0, tr, nil, nil)
			out, err := s.Start(ctx, nil)
			wantOutcome(t, "start", out, err, runtime.Waiting)
			apr := r.onlyApproval(out.Run)
			_, err = s.View(ctx, out.Run, apr.ID, "charge.get", "alice")
			if !errors.Is(err, runtime.ErrNotViewable) || !strings.Contains(err.Error(), "no-peeking") {
				t.Errorf("View under a %s rule: %v, want ErrNotViewable naming the rule", effect, err)
			}
			if n := chargeReads(rec, "ch_dup"); n != 0 {
				t.Errorf("%d reads reached Stripe, want 0", n)
			}
			for _, x := range r.auditOf(out.Run) {
				if x.Kind == "view.read" {
					t.Errorf("a refused view was recorded: %s", x.Data)
				}
			}
		})
	}
}

// TestViewLimit: the target of one approval is read at most
// MaxViewsPerApproval times; the next view is refused and reaches
// nothing.
func TestViewLimit(t *testing.T) {
	t.Parallel()
	w := startWaitingRefund(t, "ch_many")
	ctx := context.Background()
	for i := range runtime.MaxViewsPerApproval {
		if _, err := w.s.View(ctx, w.run, w.apr.ID, "charge.get", "alice"); err != nil {
			t.Fatalf("view %d: %v", i+1, err)
		}
	}
	if _, err := w.s.View(ctx, w.run, w.apr.ID, "charge.get", "alice"); !errors.Is(err, runtime.ErrNotViewable) {
		t.Fatalf("view %d: %v, want ErrNotViewable", runtime.MaxViewsPerApproval+1, err)
	}
	if n := chargeReads(w.rec, "ch_many"); n != runtime.MaxViewsPerApproval {
		t.Errorf("%d reads reached Stripe, want %d", n, runtime.MaxViewsPerApproval)
	}
}
