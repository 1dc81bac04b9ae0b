package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/store"
)

// TestPolicyApprovalNamesItsRule: the approval a policy rule requires is
// asked with the reason "policy:" and the rule's name, in its row and in
// the approval.requested record; a call the document already makes wait
// (requiresApproval) keeps its own reason, and the tool never ran.
func TestPolicyApprovalNamesItsRule(t *testing.T) {
	cfg := rigConfig{policy: map[string]any{"rules": []any{
		map[string]any{"name": "every-note", "tools": []any{"note.add"}, "effect": "requireApproval"},
	}}}
	doc := buildDoc(t, "policy-reason", map[string]any{"id": "write", "kind": "agent", "agent": "rita", "purpose": "Write a note.", "allowedTools": []string{"note.add"}})
	r := newRig(t, cfg, doc)
	ctx := context.Background()
	tr := map[string]string{"rita": `{"steps": {"write": [{"tool": "note.add", "arguments": {"body": "hello"}}]}}`}
	o, err := r.engine(0, tr, nil, nil).Start(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	apr, err := r.st.PendingApprovals(ctx, o.Run)
	if err != nil {
		t.Fatal(err)
	}
	if len(apr) != 1 || apr[0].Reason != "policy:every-note" || apr[0].Kind != store.KindCall {
		t.Fatalf("pending approvals %+v", apr)
	}
	recs, err := r.st.Audit(ctx, o.Run)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rec := range recs {
		if rec.Kind == "approval.requested" && strings.Contains(string(rec.Data), `"reason":"policy:every-note"`) {
			found = true
		}
	}
	if !found {
		t.Fatal("no approval.requested record names the rule")
	}
	if notes, err := r.st.ListNotes(ctx, "", "", 1000); err != nil || len(notes) != 0 {
		t.Fatalf("%d notes before the approval (%v)", len(notes), err)
	}
}
