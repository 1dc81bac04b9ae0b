package sqlite

import (
	"testing"

	"github.com/openplaybook/openplaybook/store"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
)

// TestTxReadsSeeBatchMates: a function's reads through its Tx (Audit,
// VerifyAudit, Approvals, Calls, Approval, Call) see what the functions
// before it in the same group commit wrote; the store's reads see only
// what was committed. The batch is forced: the writer is held while both
// functions are queued.
func TestTxReadsSeeBatchMates(t *testing.T) {
	s := openTest(t)
	run, attempt := newRun(t, s)
	var apr store.Approval
	mustTx(t, s, func(tx store.Tx) error {
		c, err := startCall(tx, run, "work", attempt, "deploy", `{}`)
		if err != nil {
			return err
		}
		apr, err = tx.CreateApproval(store.Approval{Run: run, Step: "work", Tool: "deploy", DefDigest: c.DefDigest, ArgsDigest: c.ArgsDigest, Call: &c.CallKey})
		return err
	})
	started, release := make(chan struct{}), make(chan struct{})
	held := s.Queue(bg, func(store.Tx) error { close(started); <-release; return nil })
	<-started
	first := s.Queue(bg, func(tx store.Tx) error {
		if _, err := tx.DecideApproval(apr.ID, true, "", "test"); err != nil {
			return err
		}
		if _, err := tx.Append(audit.Record{Run: run, Kind: "approval.approved", Step: "work", Tool: "deploy", Data: jsontext.Value(`{"approval":"` + apr.ID + `"}`)}); err != nil {
			return err
		}
		_, err := startCall(tx, run, "work", attempt, "lookup", `{"q":1}`)
		return err
	})
	var (
		recs             []audit.Record
		probs            []audit.Problem
		fromTx, fromPool []store.Approval
		calls            []store.Call
		one              store.Approval
		poolRecs         []audit.Record
	)
	second := s.Queue(bg, func(tx store.Tx) error {
		var err error
		if recs, err = tx.Audit(run); err != nil {
			return err
		}
		if probs, err = tx.VerifyAudit(run); err != nil {
			return err
		}
		if fromTx, err = tx.Approvals(run); err != nil {
			return err
		}
		if calls, err = tx.Calls(run, store.CallFilter{}); err != nil {
			return err
		}
		if one, err = tx.Approval(apr.ID); err != nil {
			return err
		}
		if fromPool, err = s.Approvals(bg, run); err != nil {
			return err
		}
		poolRecs, err = s.Audit(bg, run)
		return err
	})
	close(release)
	for _, q := range []store.Queued{held, first, second} {
		if err := q.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if len(recs) != 4 || recs[2].Kind != "approval.approved" || recs[3].Kind != "call.started" {
		t.Errorf("Tx.Audit saw %d records %v, want run.started, call.started, approval.approved, call.started", len(recs), recs)
	}
	if len(probs) != 0 {
		t.Errorf("Tx.VerifyAudit: %v, want a chain that verifies", probs)
	}
	if len(fromTx) != 1 || fromTx[0].Status != store.ApprovalApproved || one.Status != store.ApprovalApproved {
		t.Errorf("Tx.Approvals saw %+v and Tx.Approval %+v, want it approved", fromTx, one)
	}
	if len(calls) != 2 {
		t.Errorf("Tx.Calls saw %d calls, want 2", len(calls))
	}
	// The store's reads see the last commit only: why the runtime must
	// not read through them inside a transaction.
	if len(fromPool) != 1 || fromPool[0].Status != store.ApprovalPending || len(poolRecs) != 2 {
		t.Errorf("the store's reads inside the commit saw %+v and %d records, want it pending and 2", fromPool, len(poolRecs))
	}
}
