package runtime

import (
	"context"
	"fmt"

	"github.com/openplaybook/openplaybook/store"
)

// Cancel ends a run that has not ended: it records run.cancelled and
// run.failed (a cancelled run ends failed, with the reason "cancelled by
// BY: REASON"), fails its executing step and expires its open approvals,
// so nothing of it can run again. It takes the run's lock: a run that
// another process is executing cannot be cancelled from here (stop that
// process first); a server stops its own execution of the run before it
// calls Cancel.
func Cancel(ctx context.Context, st store.Store, runID, by, reason string) error {
	unlock, err := st.LockRun(runID)
	if err != nil {
		return fmt.Errorf("run %s: %w", runID, err)
	}
	defer unlock()
	run, err := st.GetRun(ctx, runID)
	if err != nil {
		return fmt.Errorf("run %s: %w", runID, err)
	}
	if run.Status.Ended() {
		return fmt.Errorf("run %s has ended (%s); there is nothing to cancel", runID, run.Status)
	}
	why := "cancelled by " + by
	if reason != "" {
		why += ": " + reason
	}
	steps, err := st.Steps(ctx, runID)
	if err != nil {
		return err
	}
	return st.Tx(ctx, func(tx store.Tx) error {
		for _, s := range steps {
			if s.Status != store.StepRunning && s.Status != store.StepWaiting {
				continue
			}
			if err := tx.FinishStep(runID, s.Step, s.Attempt, store.StepFailed, nil, why); err != nil {
				return err
			}
			expired, err := tx.ExpireAttemptApprovals(runID, s.Step, s.Attempt, why)
			if err != nil {
				return err
			}
			for _, a := range expired {
				if _, err := tx.Append(newRecord(identity, runID, a.Step, a.Tool, ApprovalVoided{Approval: a.ID, Attempt: s.Attempt, Index: indexOf(a), Reason: why})); err != nil {
					return err
				}
			}
			if _, err := tx.Append(newRecord(identity, runID, s.Step, "", StepFailed{Attempt: s.Attempt, Reason: why})); err != nil {
				return err
			}
		}
		if err := tx.SetRunStatus(runID, store.RunFailed, why); err != nil {
			return err
		}
		if _, err := tx.Append(newRecord(identity, runID, "", "", RunCancelled{By: by, Reason: reason})); err != nil {
			return err
		}
		_, err := tx.Append(newRecord(identity, runID, "", "", RunFailed{Reason: why}))
		return err
	})
}

func indexOf(a store.Approval) int {
	if a.Call != nil {
		return a.Call.Index
	}
	return -1
}

// Note appends ev to run's audit log, for events that record no state of
// their own (agent.token-issued, agent.token-revoked, agent.attached,
// agent.rejected): a server's record of what its agents did. redact
// removes secret values (nil: none).
func Note(ctx context.Context, st store.Store, runID string, ev Event, redact func(string) string) error {
	if redact == nil {
		redact = identity
	}
	return st.Tx(ctx, func(tx store.Tx) error {
		_, err := tx.Append(newRecord(redact, runID, "", "", ev))
		return err
	})
}

// NoteTx is [Note] inside a store transaction the caller holds.
func NoteTx(tx store.Tx, runID string, ev Event) error {
	_, err := tx.Append(newRecord(identity, runID, "", "", ev))
	return err
}
