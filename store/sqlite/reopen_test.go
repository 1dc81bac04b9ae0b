package sqlite

import (
	"errors"
	"testing"

	"github.com/openplaybook/openplaybook/store"
)

// A failed run goes back to running only through ReopenRun, which then
// lets a new attempt of its step start; no other status is reopened.
func TestReopenRun(t *testing.T) {
	s := openTest(t)
	run, attempt := newRun(t, s)
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.FinishStep(run, "work", attempt, store.StepFailed, nil, "the API answered 503"); err != nil {
			return err
		}
		return tx.SetRunStatus(run, store.RunFailed, "step work failed")
	})
	if err := s.Tx(bg, func(tx store.Tx) error { return tx.SetRunStatus(run, store.RunRunning, "") }); !errors.Is(err, store.ErrState) {
		t.Errorf("SetRunStatus on a failed run: %v, want ErrState", err)
	}
	if err := s.Tx(bg, func(tx store.Tx) error { _, err := tx.StartStep(run, "work"); return err }); !errors.Is(err, store.ErrState) {
		t.Errorf("StartStep on a failed run: %v, want ErrState", err)
	}
	var next int
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.ReopenRun(run); err != nil {
			return err
		}
		var err error
		next, err = tx.StartStep(run, "work")
		return err
	})
	if r, _ := s.GetRun(bg, run); r.Status != store.RunRunning || r.Reason != "" || next != attempt+1 {
		t.Errorf("run %s (%q), new attempt %d", r.Status, r.Reason, next)
	}
	// Running, waiting and completed runs are not reopened.
	err := s.Tx(bg, func(tx store.Tx) error { return tx.ReopenRun(run) })
	if !errors.Is(err, store.ErrState) || err.Error() != "store: wrong state: run "+run+" is running; only a failed run is reopened" {
		t.Errorf("ReopenRun of a running run: %v", err)
	}
	mustTx(t, s, func(tx store.Tx) error { return tx.SetRunStatus(run, store.RunCompleted, "") })
	if err := s.Tx(bg, func(tx store.Tx) error { return tx.ReopenRun(run) }); !errors.Is(err, store.ErrState) {
		t.Errorf("ReopenRun of a completed run: %v", err)
	}
	if err := s.Tx(bg, func(tx store.Tx) error { return tx.ReopenRun("run_0000000000000000") }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ReopenRun of no run: %v", err)
	}
}
