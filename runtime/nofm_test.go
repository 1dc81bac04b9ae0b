package runtime_test

import (
	"context"
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
