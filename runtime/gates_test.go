package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// TestGates: approving a gate follows next, rejecting it follows onReject,
// and rejecting a gate without onReject ends the run rejected, running
// nothing after it.
func TestGates(t *testing.T) {
	t.Parallel()
	branches := buildDoc(t, "branches",
		gateStep("decide", "yes", "no"),
		agentStep("yes", "clerk", []string{"note.add"}, ""),
		agentStep("no", "clerk", []string{"note.add"}, ""),
	)
	final := buildDoc(t, "final",
		agentStep("before", "clerk", []string{"note.add"}, "decide"),
		gateStep("decide", "after", ""),
		agentStep("after", "clerk", []string{"note.add"}, ""),
	)
	r := newRig(t, rigConfig{}, branches, final)
	ctx := context.Background()
	tr := map[string]string{"clerk": transcriptOf(map[string][]tcall{
		"yes":    {{"note.add", map[string]any{"body": "took yes"}}},
		"no":     {{"note.add", map[string]any{"body": "took no"}}},
		"before": {{"note.add", map[string]any{"body": "before the gate"}}},
		"after":  {{"note.add", map[string]any{"body": "after the gate"}}},
	})}
	notesOf := func(run string) []string {
		t.Helper()
		ns, err := r.st.ListNotes(ctx, "", "", 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range ns {
			if n.Run == run {
				out = append(out, n.Body)
			}
		}
		return out
	}
	for _, tc := range []struct {
		doc       int
		approve   bool
		status    runtime.Status
		notes     string
		wantAudit string
	}{
		{0, true, runtime.Completed, "took yes", "gate.approved"},
		{0, false, runtime.Completed, "took no", "gate.rejected"},
		{1, true, runtime.Completed, "after the gate|before the gate", "run.completed"},
		{1, false, runtime.Rejected, "before the gate", "run.rejected"},
	} {
		out, err := r.engine(tc.doc, tr, nil, nil).Start(ctx, nil)
		wantOutcome(t, "start", out, err, runtime.Waiting)
		if len(out.Waiting) != 1 || out.Waiting[0].Kind != "gate" || out.Waiting[0].ID != "decide" {
			t.Fatalf("waits for %+v, want the gate decide", out.Waiting)
		}
		if err := r.decide(out.Run, "decide", tc.approve, "because the test says so"); err != nil {
			t.Fatal(err)
		}
		res, err := r.engine(tc.doc, tr, nil, nil).Resume(ctx, out.Run)
		wantOutcome(t, "resume", res, err, tc.status)
		if got := strings.Join(notesOf(out.Run), "|"); got != tc.notes {
			t.Errorf("doc %d approve %v: notes %q, want %q", tc.doc, tc.approve, got, tc.notes)
		}
		recs := r.auditOf(out.Run)
		if !auditHas(recs, tc.wantAudit, "") {
			t.Errorf("doc %d approve %v: audit %v has no %s", tc.doc, tc.approve, auditKinds(recs), tc.wantAudit)
		}
		if tc.status == runtime.Rejected {
			run, err := r.st.GetRun(ctx, out.Run)
			if err != nil || run.Status != store.RunRejected || !strings.Contains(run.Reason, "decide") || !strings.Contains(res.Reason, "because the test says so") {
				t.Errorf("rejected run: %+v %v; outcome reason %q", run.Status, err, res.Reason)
			}
			// A rejected run stays rejected.
			again, err := r.engine(tc.doc, tr, nil, nil).Resume(ctx, out.Run)
			wantOutcome(t, "resume of a rejected run", again, err, runtime.Rejected)
			if n := notesOf(out.Run); len(n) != 1 {
				t.Errorf("resuming a rejected run wrote notes: %q", n)
			}
		}
	}
}
