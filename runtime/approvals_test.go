package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// approvalsDoc: step act may call mcp.ctr.launch (requiresApproval),
// charge.refund (requiresApproval), mcp.ctr.lookup and note.add; then the
// gate hold.
func approvalsDoc(t *testing.T) []byte {
	return buildDoc(t, "approvals",
		agentStep("act", "ops", []string{"mcp.ctr.launch", "charge.refund", "mcp.ctr.lookup", "note.add"}, "hold"),
		gateStep("hold", "", ""),
	)
}

type approvalsRig struct {
	*rig
	ctr    *ctrServer
	refund func() int // refund requests Stripe received
}

func newApprovalsRig(t *testing.T) approvalsRig {
	url, stripe := stripeMock(t)
	ctr := startCtr(t, true)
	r := newRig(t, rigConfig{stripe: url, http: map[string]string{"ctr": ctr.URL}, secrets: map[string]string{"STRIPE_API_KEY": "sk_test_123"}}, approvalsDoc(t))
	return approvalsRig{rig: r, ctr: ctr, refund: func() int { return refundPosts(stripe) }}
}

// TestApprovalRunsTheCallExactlyOnce: an approved call runs once, on the
// resume after the approval; resuming again, however often, answers it
// from the store and never runs it again.
func TestApprovalRunsTheCallExactlyOnce(t *testing.T) {
	t.Parallel()
	r := newApprovalsRig(t)
	ctx := context.Background()
	tr := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {
		{"mcp.ctr.launch", map[string]any{"target": "alpha"}},
		{"charge.refund", map[string]any{"chargeId": "ch_duplicate", "reason": "duplicate"}},
		{"note.add", map[string]any{"body": "launched and refunded"}},
	}})}
	resume := func(run string, want runtime.Status) runtime.Outcome {
		t.Helper()
		out, err := r.engine(0, tr, nil, nil).Resume(ctx, run)
		wantOutcome(t, "resume", out, err, want)
		return out
	}
	counts := func(what string, launches, refunds, notes int) {
		t.Helper()
		ns, _ := r.st.ListNotes(ctx, "", "", 10)
		if r.ctr.runs("launch") != launches || r.ctr.calls() != launches || r.refund() != refunds || len(ns) != notes {
			t.Fatalf("%s: ctr %s, %d refunds, %d notes; want %d launches, %d refunds, %d notes", what, r.ctr, r.refund(), len(ns), launches, refunds, notes)
		}
	}

	out, err := r.engine(0, tr, nil, nil).Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	run := out.Run
	launch := r.onlyApproval(run)
	if launch.Tool != "mcp.ctr.launch" || launch.Step != "act" || !strings.HasPrefix(launch.ID, "apr_") {
		t.Fatalf("waits for %+v, want the approval of mcp.ctr.launch", launch)
	}
	counts("waiting for the launch approval", 0, 0, 0)
	resume(run, runtime.Waiting) // nothing decided: nothing runs, nothing is asked twice
	if again := r.onlyApproval(run); again.ID != launch.ID {
		t.Fatalf("a resume without a decision asked again: %s, was %s", again.ID, launch.ID)
	}
	counts("resumed without a decision", 0, 0, 0)

	r.mustDecide(run, launch.ID, true)
	out = resume(run, runtime.Waiting)
	refund := r.onlyApproval(run)
	if refund.Tool != "charge.refund" {
		t.Fatalf("waits for %+v, want the approval of charge.refund", refund)
	}
	counts("launch approved", 1, 0, 0)
	resume(run, runtime.Waiting)
	counts("resumed again while the refund waits", 1, 0, 0)
	if err := r.decide(run, launch.ID, true, "twice"); !errors.Is(err, store.ErrState) {
		t.Errorf("approving a used approval again: %v, want store.ErrState", err)
	}

	r.mustDecide(run, refund.ID, true)
	seen := &agentLog{}
	out, err = r.engine(0, tr, seen, nil).Resume(ctx, run)
	wantOutcome(t, "resume after the refund approval", out, err, runtime.Waiting)
	if len(out.Waiting) != 1 || out.Waiting[0].ID != "hold" {
		t.Fatalf("waits for %+v, want the gate hold", out.Waiting)
	}
	counts("refund approved", 1, 1, 1)
	// The agent was answered the launch from the store: the first run's n.
	if s := seen.of("act"); len(s) != 3 || !strings.Contains(string(s[0].Res.Content), `"n":1`) || s[1].Res.Error != "" || s[2].Res.Error != "" {
		t.Errorf("the agent saw %+v", s)
	}
	for range 3 {
		resume(run, runtime.Waiting)
	}
	counts("resumed three times at the gate", 1, 1, 1)
	r.mustDecide(run, "hold", true)
	resume(run, runtime.Completed)
	resume(run, runtime.Completed)
	counts("completed", 1, 1, 1)

	rows := r.calls(run)
	checkCalls(t, rows, []wantCall{
		{"act", "mcp.ctr.launch", store.CallSucceeded},
		{"act", "charge.refund", store.CallSucceeded},
		{"act", "note.add", store.CallSucceeded},
	})
	started := 0
	for _, rec := range r.auditOf(run) {
		if rec.Kind == "call.started" && rec.Tool == "mcp.ctr.launch" {
			started++
			if !strings.Contains(string(rec.Data), launch.ID) {
				t.Errorf("call.started of the launch does not name its approval: %s", rec.Data)
			}
			// It says, as the call.waiting before it, that a side effect
			// starts, and on which definition.
			var d struct {
				SideEffecting bool   `json:"sideEffecting"`
				DefDigest     string `json:"defDigest"`
			}
			if err := json.Unmarshal(rec.Data, &d); err != nil || !d.SideEffecting || len(d.DefDigest) != 64 {
				t.Errorf("call.started of the approved launch reads %s, want sideEffecting true and its definition's digest (%v)", rec.Data, err)
			}
		}
	}
	if started != 1 {
		t.Errorf("the audit log has %d call.started for the launch, want 1", started)
	}
}

// TestApprovalIsBoundToArguments: an approval lets exactly the call it
// was asked for run. The agent asking, on resume, for the same tool with
// other arguments (as a model asked again may) waits for an approval of
// its own; the first approval is not spent on it.
func TestApprovalIsBoundToArguments(t *testing.T) {
	t.Parallel()
	r := newApprovalsRig(t)
	ctx := context.Background()
	alpha := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {{"mcp.ctr.launch", map[string]any{"target": "alpha"}}}})}
	omega := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {{"mcp.ctr.launch", map[string]any{"target": "omega"}}}})}
	out, err := r.engine(0, alpha, nil, nil).Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	run := out.Run
	first := r.onlyApproval(run)
	r.mustDecide(run, first.ID, true)

	out, err = r.engine(0, omega, nil, nil).Resume(ctx, run)
	wantOutcome(t, "resume with other arguments", out, err, runtime.Waiting)
	second := r.onlyApproval(run)
	if second.ID == first.ID || second.Tool != "mcp.ctr.launch" {
		t.Fatalf("the call with other arguments waits for %+v; want a new approval, not %s", second, first.ID)
	}
	if r.ctr.calls() != 0 {
		t.Fatalf("a call with other arguments ran on an approval for alpha: %s", r.ctr)
	}
	a, err := r.st.GetApproval(ctx, first.ID)
	if err != nil || a.Status != store.ApprovalApproved {
		t.Errorf("the approval for alpha is %s (%v), want still approved and unused", a.Status, err)
	}

	r.mustDecide(run, second.ID, true)
	out, err = r.engine(0, omega, nil, nil).Resume(ctx, run)
	wantOutcome(t, "resume with omega approved", out, err, runtime.Waiting) // at the gate
	if got := r.ctr.argsOf("launch"); len(got) != 1 || got[0] != `{"target":"omega"}` {
		t.Errorf("launch ran with %q, want omega once", got)
	}
}

// TestApprovalExpires: a request nobody decided before its expiry cannot
// be approved any more, and the call is refused (code expired) on resume,
// never run.
func TestApprovalExpires(t *testing.T) {
	t.Parallel()
	r := newApprovalsRig(t)
	ctx := context.Background()
	tr := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {
		{"mcp.ctr.launch", map[string]any{"target": "late"}},
		{"mcp.ctr.lookup", map[string]any{"id": "after expiry"}},
	}})}
	out, err := r.engine(0, tr, nil, func(o *runtime.SessionOptions) { o.ApprovalExpiry = time.Hour }).Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	run := out.Run
	apr := r.onlyApproval(run)
	later := time.Now().Add(2 * time.Hour)
	r.st.SetClock(func() time.Time { return later })
	if err := r.decide(run, apr.ID, true, "too late"); !errors.Is(err, store.ErrExpired) {
		t.Fatalf("approving an expired request: %v, want store.ErrExpired", err)
	}
	if p := r.pending(run); len(p) != 1 || p[0].Kind != "resume" {
		t.Errorf("an expired request must not be listed as decidable; the run should only ask to be resumed: %+v", p)
	}
	seen := &agentLog{}
	out, err = r.engine(0, tr, seen, nil).Resume(ctx, run)
	wantOutcome(t, "resume after expiry", out, err, runtime.Waiting) // at the gate
	if r.ctr.runs("launch") != 0 || r.ctr.runs("lookup") != 1 {
		t.Errorf("ctr: %s; want the lookup only", r.ctr)
	}
	s := seen.of("act")
	if len(s) != 2 || s[0].Res.Content != nil || !strings.Contains(s[0].Res.Error, "expired") || !strings.Contains(s[0].Res.Error, "not run") {
		t.Fatalf("the agent saw %+v, want the expiry", s)
	}
	if strings.Contains(s[0].Res.Error, "by a person") {
		t.Errorf("the agent is told a person expired the request: %q", s[0].Res.Error)
	}
	rows := r.calls(run)
	if rows[0].State != store.CallRefused || rows[0].Code != string(runtime.CodeExpired) {
		t.Errorf("the expired call is stored %s %q", rows[0].State, rows[0].Reason)
	}
}

// TestApprovalDenialReplayed: a call refused because a person denied it
// is answered from the store on every later resume of the step with the
// same refusal, naming the tool and the denial, and is never run.
func TestApprovalDenialReplayed(t *testing.T) {
	t.Parallel()
	r := newApprovalsRig(t)
	ctx := context.Background()
	tr := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {
		{"mcp.ctr.launch", map[string]any{"target": "beta"}},
		{"charge.refund", map[string]any{"chargeId": "ch_duplicate", "reason": "duplicate"}},
	}})}
	out, err := r.engine(0, tr, nil, nil).Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	run := out.Run
	if err := r.decide(run, r.onlyApproval(run).ID, false, "not this widget"); err != nil {
		t.Fatal(err)
	}
	first := &agentLog{}
	out, err = r.engine(0, tr, first, nil).Resume(ctx, run)
	wantOutcome(t, "resume after the denial", out, err, runtime.Waiting) // the refund's approval
	r.mustDecide(run, r.onlyApproval(run).ID, true)
	second := &agentLog{}
	out, err = r.engine(0, tr, second, nil).Resume(ctx, run)
	wantOutcome(t, "resume after the refund approval", out, err, runtime.Waiting) // the gate
	a, b := first.of("act"), second.of("act")
	if len(a) == 0 || len(b) == 0 || a[0].Res.Error == "" || b[0].Res.Error != a[0].Res.Error {
		t.Errorf("the denied call was answered %q, then on the next resume %q; want the same refusal", a[0].Res.Error, b[0].Res.Error)
	}
	if r.ctr.runs("launch") != 0 || r.refund() != 1 {
		t.Errorf("ctr %s, %d refunds; want no launch, one refund", r.ctr, r.refund())
	}
	rows := r.calls(run)
	if rows[0].State != store.CallRefused || rows[0].Code != string(runtime.CodeDenied) {
		t.Errorf("the denied call is stored %s %q, want its refusal code first", rows[0].State, rows[0].Reason)
	}
}
