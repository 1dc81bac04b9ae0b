package runtime_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// nofmRig starts a run whose note waits for approvals distinct people of
// finance and returns the rig, the run and the approval id.
func nofmRig(t *testing.T, approvals int) (*rig, string, string) {
	t.Helper()
	cfg := rigConfig{policy: map[string]any{"rules": []any{
		map[string]any{"name": "finance-reads", "tools": []any{"note.add"}, "effect": "requireApproval",
			"deciders": map[string]any{"groups": []any{"finance"}}, "approvals": approvals},
	}}}
	doc := buildDoc(t, "nofm", map[string]any{"id": "write", "kind": "agent", "agent": "rita", "purpose": "Write a note.", "allowedTools": []string{"note.add"}})
	r := newRig(t, cfg, doc)
	tr := map[string]string{"rita": `{"steps": {"write": [{"tool": "note.add", "arguments": {"body": "hello"}}]}}`}
	o, err := r.engine(0, tr, nil, nil).Start(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	apr, err := r.st.PendingApprovals(context.Background(), o.Run)
	if err != nil || len(apr) != 1 {
		t.Fatalf("pending approvals %+v, %v", apr, err)
	}
	return r, o.Run, apr[0].ID
}

// TestNofMConcurrentApprovers: four people of finance approve a call
// that needs three, each twice and all at once. The store ends with
// three endorsements by three distinct people, one approval.approved
// naming them, and the approval approved; no one is counted twice, and
// every other attempt is refused.
func TestNofMConcurrentApprovers(t *testing.T) {
	r, run, id := nofmRig(t, 3)
	ctx := context.Background()
	people := []string{"alice", "bob", "carol", "dan"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := range 2 * len(people) {
		wg.Go(func() {
			v := runtime.Verdict{Approve: true, By: people[i%len(people)], Verified: true, Groups: []string{"finance"}, Reason: "ok"}
			if _, err := runtime.Decide(ctx, r.st, run, id, v); err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var endorsed, approved []string
	var approvers []string
	for _, rec := range r.auditOf(run) {
		var d struct {
			By        string   `json:"by"`
			Approvers []string `json:"approvers"`
		}
		if err := json.Unmarshal(rec.Data, &d); err != nil && len(rec.Data) > 0 {
			t.Fatal(err)
		}
		switch rec.Kind {
		case "approval.endorsed":
			endorsed = append(endorsed, d.By)
		case "approval.approved":
			approved = append(approved, d.By)
			approvers = d.Approvers
		}
	}
	distinct := slices.Clone(endorsed)
	slices.Sort(distinct)
	if len(endorsed) != 3 || len(slices.Compact(distinct)) != 3 || len(approved) != 1 || !slices.Equal(approvers, endorsed) || ok != 3 {
		t.Fatalf("endorsed %v, approved %v (approvers %v), %d decisions taken; want 3 distinct endorsements, one approval naming them", endorsed, approved, approvers, ok)
	}
	a, err := r.st.GetApproval(ctx, id)
	if err != nil || a.Status != store.ApprovalApproved {
		t.Fatalf("approval %+v, %v", a, err)
	}
}

// TestNofMDenyDeniesAtOnce: with one of two approvals given, a denial by
// another decider denies the call; a later approval is refused and the
// note is never written.
func TestNofMDenyDeniesAtOnce(t *testing.T) {
	r, run, id := nofmRig(t, 2)
	ctx := context.Background()
	fin := []string{"finance"}
	if _, err := runtime.Decide(ctx, r.st, run, id, runtime.Verdict{Approve: true, By: "alice", Verified: true, Groups: fin}); err != nil {
		t.Fatal(err)
	}
	if _, err := runtime.Decide(ctx, r.st, run, id, runtime.Verdict{Approve: false, By: "bob", Verified: true, Groups: fin, Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	if _, err := runtime.Decide(ctx, r.st, run, id, runtime.Verdict{Approve: true, By: "carol", Verified: true, Groups: fin}); err == nil {
		t.Fatal("an approval after the denial was taken")
	}
	a, err := r.st.GetApproval(ctx, id)
	if err != nil || a.Status != store.ApprovalDenied || a.DecidedBy != "bob" {
		t.Fatalf("approval %+v, %v", a, err)
	}
	tr := map[string]string{"rita": `{"steps": {"write": [{"tool": "note.add", "arguments": {"body": "hello"}}]}}`}
	if _, err := r.engine(0, tr, nil, nil).Resume(ctx, run); err != nil {
		t.Fatal(err)
	}
	if notes, err := r.st.ListNotes(ctx, "", "", 10); err != nil || len(notes) != 0 {
		t.Fatalf("%d notes (%v)", len(notes), err)
	}
}

// TestNofMGateEndorserApprovesCall: gate hold needs two people of
// finance; alice endorses it, bob's approval opens it. The call of the
// next step then waits for approval: alice approved the gate as surely as
// bob did (approval.approved names both), so neither may approve the
// call (self-approval); carol may.
func TestNofMGateEndorserApprovesCall(t *testing.T) {
	cfg := rigConfig{policy: map[string]any{"rules": []any{
		map[string]any{"name": "two-open-hold", "gates": []any{"hold"}, "effect": "requireApproval",
			"deciders": map[string]any{"groups": []any{"finance"}}, "approvals": 2},
		map[string]any{"name": "notes-need-approval", "tools": []any{"note.add"}, "effect": "requireApproval"},
	}}}
	doc := buildDoc(t, "gatethencall", gateStep("hold", "write", ""),
		map[string]any{"id": "write", "kind": "agent", "agent": "rita", "purpose": "Write a note.", "allowedTools": []string{"note.add"}})
	r := newRig(t, cfg, doc)
	ctx := context.Background()
	tr := map[string]string{"rita": `{"steps": {"write": [{"tool": "note.add", "arguments": {"body": "hello"}}]}}`}
	o, err := r.engine(0, tr, nil, nil).Start(ctx, nil)
	wantOutcome(t, "start", o, err, runtime.Waiting)
	fin := []string{"finance"}
	for _, who := range []string{"alice", "bob"} {
		if _, err := runtime.Decide(ctx, r.st, o.Run, "hold", runtime.Verdict{Approve: true, By: who, Verified: true, Groups: fin, Reason: "ok"}); err != nil {
			t.Fatalf("%s at the gate: %v", who, err)
		}
	}
	o, err = r.engine(0, tr, nil, nil).Resume(ctx, o.Run)
	wantOutcome(t, "resume", o, err, runtime.Waiting)
	apr, err := r.st.PendingApprovals(ctx, o.Run)
	if err != nil || len(apr) != 1 {
		t.Fatalf("pending approvals %+v, %v", apr, err)
	}
	for _, who := range []string{"alice", "bob"} {
		_, err := runtime.Decide(ctx, r.st, o.Run, apr[0].ID, runtime.Verdict{Approve: true, By: who, Verified: true, Groups: fin, Reason: "mine"})
		if !errors.Is(err, runtime.ErrNotDecider) {
			t.Errorf("%s, who approved gate hold, approved its call: %v", who, err)
		}
	}
	if _, err := runtime.Decide(ctx, r.st, o.Run, apr[0].ID, runtime.Verdict{Approve: true, By: "carol", Verified: true, Groups: fin, Reason: "ok"}); err != nil {
		t.Fatalf("carol: %v", err)
	}
}
