package runtime_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/openplaybook/openplaybook/internal/teststore"
	"github.com/openplaybook/openplaybook/runtime"
)

// hostileWrite changes the store's file as another process would: a
// connection of its own, plain SQL.
func hostileWrite(t *testing.T, path, query string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(query, args...)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("the hostile write changed %d rows, want 1", n)
	}
}

// hostileWrite is the package's hostileWrite on the rig's store, whichever
// engine it is (internal/teststore.Exec): another process writing the
// database directly.
func (r *rig) hostileWrite(query string, args ...any) {
	r.t.Helper()
	if n := teststore.Exec(r.t, r.h, query, args...); n != 1 {
		r.t.Fatalf("the hostile write changed %d rows, want 1", n)
	}
}

// TestFlippedDecisionsDoNothing: an approval or a gate flipped to approved
// in SQLite by another process, without a decision record in the run's
// audit chain, does nothing: resume refuses, saying the store was altered,
// and the upstream server never sees the call.
func TestFlippedDecisionsDoNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, query string
	}{
		{"approval", `UPDATE approvals SET status = 'approved', decided_by = 'mallory' WHERE run = ? AND status = 'pending'`},
		{"gate", `UPDATE gates SET status = 'approved', decided_by = 'mallory' WHERE run = ? AND status = 'waiting'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctr := startCtr(t, true)
			steps := []map[string]any{agentStep("act", "ops", []string{"mcp.ctr.launch"}, "")}
			if tc.name == "gate" {
				steps = []map[string]any{gateStep("hold", "act", ""), agentStep("act", "ops", []string{"mcp.ctr.launch"}, "")}
			}
			r := newRig(t, rigConfig{http: map[string]string{"ctr": ctr.URL}}, buildDoc(t, "flip", steps...))
			ctx := context.Background()
			tr := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {{"mcp.ctr.launch", map[string]any{"target": "alpha"}}}})}
			out, err := r.engine(0, tr, nil, nil).Start(ctx, nil)
			wantOutcome(t, "start", out, err, runtime.Waiting)
			r.hostileWrite(tc.query, out.Run)
			_, err = r.engine(0, tr, nil, nil).Resume(ctx, out.Run)
			if !errors.Is(err, runtime.ErrStoreAltered) {
				t.Fatalf("resume after a flipped %s: %v, want ErrStoreAltered", tc.name, err)
			}
			if ctr.calls() != 0 {
				t.Fatalf("the server received %d calls after a flipped %s: %s", ctr.calls(), tc.name, ctr)
			}
			ds, err := runtime.Disagreements(ctx, r.st, out.Run)
			table := map[string]string{"approval": "approvals", "gate": "gates"}[tc.name]
			if err != nil || !hasDisagreement(ds, table, "status") || !hasDisagreement(ds, table, "decided_by") {
				t.Errorf("Disagreements = %v, %v; want the flipped %s's status and decided_by named", ds, err, tc.name)
			}
		})
	}
}

// TestReconcileFindsEditedRows: a call row whose state was edited, and a
// call row added by hand, disagree with the chain; an untouched run
// reconciles clean.
func TestReconcileFindsEditedRows(t *testing.T) {
	t.Parallel()
	doc := buildDoc(t, "edit", agentStep("write", "clerk", []string{"note.add"}, ""))
	r := newRig(t, rigConfig{}, doc)
	ctx := context.Background()
	tr := map[string]string{"clerk": transcriptOf(map[string][]tcall{"write": {{"note.add", map[string]any{"body": "one"}}}})}
	out, err := r.engine(0, tr, nil, nil).Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Completed)
	if probs, err := runtime.Reconcile(ctx, r.st, out.Run); err != nil || len(probs) != 0 {
		t.Fatalf("an untouched run: %q %v", probs, err)
	}
	r.hostileWrite(`UPDATE calls SET state = 'failed', error = 'x' WHERE run = ?`, out.Run)
	r.hostileWrite(`UPDATE runs SET status = 'failed' WHERE id = ?`, out.Run)
	ds, err := runtime.Disagreements(ctx, r.st, out.Run)
	if err != nil || !hasDisagreement(ds, "calls", "state") || !hasDisagreement(ds, "calls", "error") || !hasDisagreement(ds, "runs", "status") {
		t.Errorf("Disagreements = %v, %v", ds, err)
	}
	for _, d := range ds {
		if d.Seq == 0 || !strings.Contains(d.Message, fmt.Sprintf("audit record %d", d.Seq)) {
			t.Errorf("%q does not name the audit record that says otherwise", d.Message)
		}
	}
}

// hasDisagreement reports whether ds names the column of the table.
func hasDisagreement(ds []runtime.Disagreement, table, column string) bool {
	for _, d := range ds {
		if d.Table == table && d.Column == column {
			return true
		}
	}
	return false
}
