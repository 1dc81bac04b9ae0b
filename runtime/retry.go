package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/store"
)

// ErrNotRetryable is wrapped by the error of a [Session.Retry] that is
// refused: the run is not failed, was cancelled, did not fail at an agent
// step, or failed for a reason a new attempt would meet again (without
// RetryOptions.Force). Nothing was recorded.
var ErrNotRetryable = errors.New("the run is not retried")

// RetryOptions says who retries a failed run and why.
type RetryOptions struct {
	// By is who retries (recorded in run.retried); Reason why (recorded;
	// may be empty).
	By, Reason string
	// Force retries a step whose failure was not transient (a refused
	// reply, a provider's 4xx, the turn limit, a driver that could not be
	// built, a call record that could not be written). It never retries
	// a cancelled run.
	Force bool
}

// failure is how a failed run failed, from its verified audit records
// since its last retry.
type failure struct {
	step      string // the step whose attempt failed ("" when none did)
	attempt   int
	reason    string // the step.failed record's reason
	transient bool
	cancelled string // "by ...: reason" of a run.cancelled record ("" none)
	run       string // the run.failed record's reason
}

func failureOf(recs []audit.Record) failure {
	var f failure
	for _, r := range recs {
		switch EventKind(r.Kind) {
		case KindRunRetried:
			f = failure{}
		case KindStepFailed:
			var d StepFailed
			_ = json.Unmarshal(r.Data, &d)
			f.step, f.attempt, f.reason, f.transient = r.Step, d.Attempt, d.Reason, d.Transient
		case KindRunCancelled:
			var d RunCancelled
			_ = json.Unmarshal(r.Data, &d)
			f.cancelled = d.By
			if d.Reason != "" {
				f.cancelled += ": " + d.Reason
			}
		case KindRunFailed:
			var d RunFailed
			_ = json.Unmarshal(r.Data, &d)
			f.run = d.Reason
		}
	}
	return f
}

// Retry starts a new attempt of the step a failed run failed at, and
// runs the run on from there as [Session.Resume] does. It is for a
// failure that may pass on a new attempt: the step's step.failed record
// says it was transient (a model API's 408, 409, 429 or 5xx after the
// SDK's own retries, a request timeout, a connection error; see
// driver.Transient). Any other failure is refused with an error wrapping
// [ErrNotRetryable] that says why, unless opt.Force; a cancelled run, a
// run that is not failed, and a run that did not fail at an agent step
// are always refused.
//
// Before anything is recorded it checks the run as Resume does (the audit
// chain, [Reconcile], the document, the harness). Then, in one
// transaction, the run goes back to running (store ReopenRun) and the new
// attempt starts, recorded as run.retried (by, reason, force) and
// step.retried (the new attempt, the failed one, its failure).
//
// The failed attempt's calls belong to it: none is run again. The new
// attempt's agent is given those that ran (succeeded, or failed after
// running) with their results as StepInput.Made, so a model goes on
// instead of starting over; a call it asks again with the same name and
// arguments is answered from the failed attempt's record, and a new
// side-effecting call to a tool that already ran (or may have) waits for
// a person, as in a resumed step (docs/runtime.md, "Retrying a failed
// step"). A side-effecting call of the failed attempt that was sent and
// whose outcome was never recorded is marked outcome-unknown in the
// retry's transaction and is never sent again, forced or not, without a
// person's decision: the new attempt waits for it when its agent asks the
// call again, or before the step ends when it does not.
func (s *Session) Retry(ctx context.Context, runID string, opt RetryOptions) (Outcome, error) {
	unlock, err := s.opt.Store.LockRun(runID)
	if err != nil {
		return Outcome{Run: runID}, fmt.Errorf("run %s: %w", runID, err)
	}
	defer unlock()
	run, err := s.opt.Store.GetRun(ctx, runID)
	if err != nil {
		return Outcome{Run: runID}, err
	}
	switch run.Status {
	case store.RunFailed:
	case store.RunRunning, store.RunWaiting:
		return Outcome{Run: runID}, fmt.Errorf("%w: run %s is %s, not failed; continue it with resume", ErrNotRetryable, runID, run.Status)
	default:
		return Outcome{Run: runID}, fmt.Errorf("%w: run %s is %s, not failed; only a failed run is retried", ErrNotRetryable, runID, run.Status)
	}
	ck, err := s.checkRun(ctx, run, "retry")
	if err != nil {
		return Outcome{Run: runID}, err
	}
	f := failureOf(ck.recs)
	switch {
	case f.cancelled != "":
		return Outcome{Run: runID}, fmt.Errorf("%w: run %s was cancelled by %s; a cancelled run is never retried", ErrNotRetryable, runID, f.cancelled)
	case f.step == "":
		return Outcome{Run: runID}, fmt.Errorf("%w: run %s did not fail at a step (%s); there is no step to try again", ErrNotRetryable, runID, f.run)
	}
	si := s.im.steps[f.step]
	if si == nil || playbook.Str(si.step.Kind) != playbook.KindAgent {
		return Outcome{Run: runID}, fmt.Errorf("%w: run %s failed at step %q, which is not an agent step of the document", ErrNotRetryable, runID, f.step)
	}
	if !f.transient && !opt.Force {
		return Outcome{Run: runID}, fmt.Errorf("%w: step %s of run %s failed for a reason a new attempt would likely meet again: %s; retry starts a new attempt only of a step that failed transiently (a model API's 429 or 5xx, a timeout, a connection error); --force retries it anyway", ErrNotRetryable, f.step, runID, f.reason)
	}
	steps, err := s.opt.Store.Steps(ctx, runID)
	if err != nil {
		return Outcome{Run: runID}, err
	}
	last := store.Step{}
	for _, st := range steps {
		if st.Step == f.step && st.Attempt > last.Attempt {
			last = st
		}
	}
	if last.Attempt != f.attempt || last.Status != store.StepFailed {
		return Outcome{Run: runID}, fmt.Errorf("run %s: %w: its audit log says attempt %d of step %s failed, but the store's last attempt of it is %d (%s)", runID, ErrStoreAltered, f.attempt, f.step, last.Attempt, last.Status)
	}
	// A side-effecting call of the failed attempts that was sent and
	// whose outcome was never recorded is not sent again, forced or not,
	// without a person's decision: it becomes outcome-unknown with the
	// retry, and the retried attempt waits for that decision when its
	// agent asks the call again (see Caller.rerunPrior).
	lost, err := s.lostCalls(ctx, runID, f.step, last.Attempt+1)
	if err != nil {
		return Outcome{Run: runID}, err
	}
	reason, by := s.opt.Redact(opt.Reason), s.opt.Redact(opt.By)
	var attempt int
	err = s.opt.Store.Tx(ctx, func(tx store.Tx) error {
		if ck.changed {
			if err := s.append(tx, runID, "", "", RunHarnessChanged{From: ck.harness, To: s.opt.HarnessDigest}); err != nil {
				return err
			}
		}
		if err := tx.ReopenRun(runID); err != nil {
			return err
		}
		a, err := tx.StartStep(runID, f.step)
		if err != nil {
			return err
		}
		attempt = a
		if err := s.append(tx, runID, f.step, "", RunRetried{By: by, Reason: reason, Force: !f.transient}); err != nil {
			return err
		}
		if err := s.append(tx, runID, f.step, "", StepRetried{Attempt: a, Retries: f.attempt, Failure: f.reason, Transient: f.transient}); err != nil {
			return err
		}
		for _, c := range lost {
			ap, err := tx.MarkOutcomeUnknown(c.CallKey, lostReason)
			if err != nil {
				return err
			}
			if err := s.append(tx, runID, f.step, c.Tool, CallOutcomeUnknown{Attempt: c.Attempt, Index: c.Index, Approval: ap.ID}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Outcome{Run: runID}, err
	}
	if ck.changed {
		s.progress("run %s: the harness changed since it was started; the change was accepted and recorded", runID)
	}
	if err := s.noteDrift(ctx, runID, ck.recs); err != nil {
		return Outcome{Run: runID}, err
	}
	s.progress("run %s retried: step %s, attempt %d (attempt %d failed: %s)", runID, f.step, attempt, f.attempt, f.reason)
	out, err := s.loop(ctx, runID)
	out.Run = runID
	return out, err
}

// retriedCalls returns the calls of the failed attempts that attempt of
// stepID retries, oldest first: the attempts just before it that failed
// (a failed attempt ends its run, so one followed by another attempt was
// retried). None for an attempt that is no retry.
func (s *Session) retriedCalls(ctx context.Context, runID, stepID string, attempt int) ([]store.Call, error) {
	if attempt <= 1 {
		return nil, nil
	}
	steps, err := s.opt.Store.Steps(ctx, runID)
	if err != nil {
		return nil, err
	}
	failed := map[int]bool{}
	for _, st := range steps {
		if st.Step == stepID && st.Status == store.StepFailed {
			failed[st.Attempt] = true
		}
	}
	first := attempt
	for first > 1 && failed[first-1] {
		first--
	}
	var out []store.Call
	for a := first; a < attempt; a++ {
		calls, err := s.opt.Store.Calls(ctx, runID, store.CallFilter{Step: stepID, Attempt: a})
		if err != nil {
			return nil, err
		}
		out = append(out, calls...)
	}
	return out, nil
}

// ran reports whether a recorded call ran and its outcome is known: it
// succeeded, or failed after it was let run.
func ran(c store.Call) bool {
	return c.State == store.CallSucceeded || c.State == store.CallFailed && c.Decision == store.DecisionAllowed
}

// deniedReason is the error of an outcome-unknown call a person decided
// not to run again.
const deniedReason = "the outcome of this call is unknown and a person decided not to run it again"

// lostReason is why a started call of a failed attempt is outcome-unknown
// when its step is retried.
const lostReason = "the call was sent and its outcome was never recorded before its step failed"

// lostCalls returns the side-effecting calls of the failed attempts that
// attempt retries which are still started: sent, and never recorded (the
// process or its store failed in between). The retry marks them
// outcome-unknown.
func (s *Session) lostCalls(ctx context.Context, runID, stepID string, attempt int) ([]store.Call, error) {
	prior, err := s.retriedCalls(ctx, runID, stepID, attempt)
	if err != nil {
		return nil, err
	}
	var lost []store.Call
	for _, c := range prior {
		if c.State == store.CallStarted && inFlight(s.im, c) {
			lost = append(lost, c)
		}
	}
	return lost, nil
}
