package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/store"
)

// loop executes steps from the run's current point until the run ends or
// waits.
//
// What one step needs of the run's earlier steps (which attempt of the
// current step runs, the outputs of the steps done) is read from the
// store once, when the loop starts, and then carried forward from the
// changes the loop itself commits, so that a step costs the same however
// many steps came before it ([loopState]).
func (s *Session) loop(ctx context.Context, runID string) (Outcome, error) {
	ls, err := s.loopState(ctx, runID)
	if err != nil {
		return Outcome{}, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return Outcome{Status: Failed, Reason: err.Error()}, err
		}
		run := ls.run
		if run == nil {
			r, err := s.opt.Store.GetRun(ctx, runID)
			if err != nil {
				return Outcome{}, err
			}
			run = &r
		}
		ls.run = nil
		if run.Status.Ended() {
			return Outcome{Status: Status(run.Status), Reason: run.Reason}, nil
		}
		stepID, attempt, status, err := s.current(ctx, *run, ls)
		if err != nil {
			return Outcome{}, err
		}
		si := s.im.steps[stepID]
		if si == nil {
			return s.fail(ctx, runID, fmt.Sprintf("step %q is not in the document", stepID))
		}
		var next string
		var out Outcome
		var done bool
		switch playbook.Str(si.step.Kind) {
		case playbook.KindAgent:
			next, out, done, err = s.agentStep(ctx, *run, si, attempt, status, ls)
		case playbook.KindGate:
			next, out, done, err = s.gateStep(ctx, runID, si, attempt, status, ls)
		default:
			return s.fail(ctx, runID, fmt.Sprintf("step %q has kind %q, which this runtime cannot run", stepID, playbook.Str(si.step.Kind)))
		}
		if err != nil || done {
			return out, err
		}
		for {
			err := s.advance(ctx, runID, stepID, next, ls)
			failed := ls.endFailed
			ls.endFailed = nil
			if err == nil {
				break
			}
			if failed == nil {
				return Outcome{}, err
			}
			// The step's end shared its call records' commit and did
			// not commit: it is ended the slow way, or fails.
			if out, done, err := failed(ctx, err); done {
				return out, err
			}
		}
		if next != "" {
			// The run's row as advance left it: running at next. The
			// document and input are what they were (no writer changes
			// them); the run is read again when it ended, for its
			// outcome.
			r := *run
			r.Status, r.CurrentStep = store.RunRunning, next
			ls.run = &r
		}
	}
}

// loopState is what [Session.loop] carries from one step to the next.
// It is read from the store when the loop starts and then kept as the
// loop's own committed changes leave the rows: one process executes a
// run (its lock), so no other writer moves its steps meanwhile.
type loopState struct {
	// run is the run's row as the last step left it, nil when it is to
	// be read from the store.
	run *store.Run
	// prior are the outputs of the run's steps done, in the order the
	// store lists the steps (by start): what [Session.StepInput] gives.
	prior []driver.Prior
	// step, attempt and status are the step attempt the loop started
	// last ([Session.advance]), "" until it started one. A run row
	// naming another current step is read from the store, as before.
	step    string
	attempt int
	status  store.StepStatus
	// fresh says the loop started that attempt and has not yet run it:
	// it has made no call.
	fresh bool
	// steps is the store's list read when the loop started, until the
	// first step is known (nil after).
	steps []store.Step
	// end, when set, ends the step attempt the loop ran last: it runs in
	// the transaction of what follows ([Session.advance]), its audit
	// records added to later, appended with those of what follows; ended
	// runs once that committed.
	end   func(tx store.Tx, later *appendLater) error
	ended func()
	// endFailed, when set, is what the loop does when that transaction
	// failed: end the attempt the slow way (done false: end and ended
	// are set again, to run in a new transaction), or end the run or
	// wait (done true, with the outcome and error the loop returns).
	endFailed func(ctx context.Context, err error) (out Outcome, done bool, _ error)
}

// loopState reads what a loop starts from.
func (s *Session) loopState(ctx context.Context, runID string) (*loopState, error) {
	steps, err := s.opt.Store.Steps(ctx, runID)
	if err != nil {
		return nil, err
	}
	return &loopState{prior: priorOutputs(steps), steps: steps}, nil
}

// priorOutputs are the outputs of the steps done, in the order listed.
func priorOutputs(steps []store.Step) []driver.Prior {
	var out []driver.Prior
	for _, st := range steps {
		if st.Status == store.StepDone && len(st.Output) > 0 {
			out = append(out, driver.Prior{StepID: st.Step, Output: st.Output})
		}
	}
	return out
}

// finished records in ls that a step attempt is done with output.
func (ls *loopState) finished(step string, output jsontext.Value) {
	if ls == nil {
		return
	}
	if ls.step == step {
		ls.status = store.StepDone
	}
	if len(output) > 0 {
		ls.prior = append(ls.prior, driver.Prior{StepID: step, Output: output})
	}
}

// current returns the run's current step and its latest attempt, starting
// the entry step of a new run.
func (s *Session) current(ctx context.Context, run store.Run, ls *loopState) (step string, attempt int, status store.StepStatus, err error) {
	if run.CurrentStep == "" {
		entry := s.im.Doc.Steps[0]
		step = playbook.Str(entry.ID)
		err = s.opt.Store.Tx(ctx, func(tx store.Tx) error {
			a, err := tx.StartStep(run.ID, step)
			if err != nil {
				return err
			}
			attempt = a
			return s.append(tx, run.ID, step, "", StepStarted{Attempt: a})
		})
		if err == nil {
			ls.started(step, attempt)
		}
		s.progress("step %s (%s)", step, stepLabel(entry))
		return step, attempt, store.StepRunning, err
	}
	if ls != nil && ls.step != "" && ls.step == run.CurrentStep {
		return ls.step, ls.attempt, ls.status, nil
	}
	var steps []store.Step
	if ls != nil && ls.steps != nil {
		steps, ls.steps = ls.steps, nil
	} else if steps, err = s.opt.Store.Steps(ctx, run.ID); err != nil {
		return "", 0, "", err
	}
	for _, st := range steps {
		if st.Step == run.CurrentStep && st.Attempt >= attempt {
			attempt, status = st.Attempt, st.Status
		}
	}
	if attempt == 0 {
		return "", 0, "", fmt.Errorf("run %s: its current step %q has no recorded attempt", run.ID, run.CurrentStep)
	}
	if ls != nil {
		ls.step, ls.attempt, ls.status = run.CurrentStep, attempt, status
	}
	return run.CurrentStep, attempt, status, nil
}

// started records in ls the step attempt the loop started.
func (ls *loopState) started(step string, attempt int) {
	if ls != nil {
		ls.step, ls.attempt, ls.status, ls.steps, ls.fresh = step, attempt, store.StepRunning, nil, true
	}
}

func stepLabel(s *playbook.Step) string {
	if playbook.Str(s.Kind) == playbook.KindGate {
		return "gate"
	}
	return "agent " + playbook.Str(s.Agent)
}

// advance moves the run from step to next, or completes it when next is
// "".
func (s *Session) advance(ctx context.Context, runID, from, next string, ls *loopState) error {
	end, ended := ls.end, ls.ended
	ls.end, ls.ended = nil, nil
	if end == nil {
		end, ended = func(store.Tx, *appendLater) error { return nil }, func() {}
	}
	// The end's audit records and those of what follows are appended
	// together: the run's audit head moves once.
	if next == "" {
		err := s.opt.Store.Tx(ctx, func(tx store.Tx) error {
			later := s.appendLater(runID)
			if err := end(tx, later); err != nil {
				return err
			}
			if err := tx.SetRunStatus(runID, store.RunCompleted, ""); err != nil {
				return err
			}
			later.add(from, "", RunCompleted{})
			return later.flush(tx)
		})
		if err == nil {
			ended()
			s.progress("run %s completed", runID)
		}
		return err
	}
	var attempt int
	err := s.opt.Store.Tx(ctx, func(tx store.Tx) error {
		later := s.appendLater(runID)
		if err := end(tx, later); err != nil {
			return err
		}
		a, err := tx.StartStep(runID, next)
		if err != nil {
			return err
		}
		attempt = a
		later.add(next, "", StepStarted{Attempt: a, From: from})
		return later.flush(tx)
	})
	if err == nil {
		ended()
		ls.started(next, attempt)
		s.progress("step %s (%s)", next, stepLabel(s.im.steps[next].step))
	}
	return err
}

// fail ends the run as failed.
func (s *Session) fail(ctx context.Context, runID, reason string) (Outcome, error) {
	reason = s.opt.Redact(reason)
	err := s.opt.Store.Tx(ctx, func(tx store.Tx) error {
		if err := tx.SetRunStatus(runID, store.RunFailed, reason); err != nil {
			return err
		}
		return s.append(tx, runID, "", "", RunFailed{Reason: reason})
	})
	s.progress("run %s failed: %s", runID, reason)
	return Outcome{Status: Failed, Reason: reason}, err
}

// agentStep runs (or re-runs, on resume) one attempt of an agent step
// through its driver.
func (s *Session) agentStep(ctx context.Context, run store.Run, si *stepInfo, attempt int, status store.StepStatus, ls *loopState) (next string, out Outcome, done bool, err error) {
	runID, stepID := run.ID, playbook.Str(si.step.ID)
	switch status {
	case store.StepDone:
		return playbook.Str(si.step.Next), Outcome{}, false, nil
	case store.StepFailed:
		o, err := s.fail(ctx, runID, fmt.Sprintf("step %q failed", stepID))
		return "", o, true, err
	case store.StepWaiting:
		if err := s.opt.Store.Tx(ctx, func(tx store.Tx) error {
			if err := tx.SetStepRunning(runID, stepID, attempt); err != nil {
				return err
			}
			return s.append(tx, runID, stepID, "", StepResumed{Attempt: attempt})
		}); err != nil {
			return "", Outcome{}, true, err
		}
	}
	drv, err := s.opt.Driver(playbook.Str(si.step.Agent))
	if err != nil {
		o, ferr := s.failStep(ctx, runID, stepID, attempt, fmt.Sprintf("agent %q: %v", playbook.Str(si.step.Agent), err), false)
		return "", o, true, ferr
	}
	in, err := s.stepInput(ctx, run, stepID, attempt, ls)
	if err != nil {
		return "", Outcome{}, true, err
	}
	c, err := s.newCaller(ctx, runID, stepID, attempt, ls.fresh)
	ls.fresh = false
	if err != nil {
		return "", Outcome{}, true, err
	}
	if dd, ok := drv.(driver.Deterministic); ok && dd.Deterministic() {
		c.replays = true
	}
	if dc, ok := drv.(driver.Continuing); ok && dc.Continuing() {
		c.continues = true
	}
	output, err := drv.RunStep(ctx, in, c)
	// Every call record is durable before the step is suspended, failed
	// or finished. A step that finished (and retries no failed attempt)
	// does not wait for its records: its end shares their commit, and
	// checks in its transaction that they are kept and that none of its
	// calls is left without an outcome (stepend.go); otherwise it is
	// ended the slow way (endFailed).
	var check *endCheck
	if err == nil && !c.retries() {
		check = c.endCheck()
	} else if ferr := c.Flush(); ferr != nil && (err == nil || errors.Is(err, driver.ErrSuspended)) {
		o, serr := s.failStep(ctx, runID, stepID, attempt, ferr.Error(), false)
		return "", o, true, errors.Join(ferr, serr)
	}
	var re *driver.ReplyError
	if errors.As(err, &re) && len(re.Calls) > 0 {
		// The reply's calls never ran: each is recorded as refused with
		// the reply's code, then the step fails with the reason.
		if rerr := c.refuseReply(ctx, re); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	switch {
	case errors.Is(err, driver.ErrSuspended):
		o, err := s.suspend(ctx, runID, stepID, attempt)
		return "", o, true, err
	case errors.Is(err, driver.ErrAwaitAgent):
		o, err := s.awaitAgent(ctx, runID, stepID, attempt)
		return "", o, true, err
	case err != nil:
		// A model API's 429 or 5xx, a timeout, a connection error: a new
		// attempt may pass (openplaybook retry; docs/runtime.md,
		// "Retrying a failed step").
		o, ferr := s.failStep(ctx, runID, stepID, attempt, err.Error(), driver.Transient(err))
		return "", o, true, ferr
	}
	if serr := c.Err(); serr != nil {
		o, ferr := s.failStep(ctx, runID, stepID, attempt, serr.Error(), false)
		return "", o, true, errors.Join(serr, ferr)
	}
	// A step does not end while one of its calls has no known outcome
	// (the agent went on without asking it again): a person decides it
	// first, and the step waits. With check, the end's transaction finds
	// such a call, and endFailed resolves it.
	if check == nil {
		if o, done, err := s.resolveCalls(ctx, c, runID, stepID, attempt); done {
			return "", o, true, err
		}
	}
	output = jsontext.Value(s.opt.Redact(string(output)))
	if !output.IsValid() {
		// Not JSON (or not UTF-8): kept as a JSON string, invalid bytes
		// read as U+FFFD, so the output is never lost.
		output, _ = json.Marshal(string(output), jsontext.AllowInvalidUTF8(true))
	}
	// The attempt's end is committed with what follows it (the next
	// step's start, or the run's completion: [Session.advance]), in one
	// transaction. Nothing reaches anyone outside the process between
	// the two (what this step says of its end is said once they are
	// durable), so a crash leaves the same states as two commits would:
	// the attempt running (and taken up again on resume), or the next
	// step started.
	calls := c.Calls()
	var voided []store.Approval
	end := func(tx store.Tx, later *appendLater) error {
		if check != nil {
			if err := check.ok(tx); err != nil {
				return err
			}
		}
		if err := tx.FinishStep(runID, stepID, attempt, store.StepDone, output, ""); err != nil {
			return err
		}
		var err error
		if voided, err = s.endApprovals(tx, runID, stepID, attempt, later); err != nil {
			return err
		}
		later.add(stepID, "", StepFinished{Attempt: attempt, Calls: calls, OutputDigest: digest(output)})
		return nil
	}
	ended := func() {
		ls.finished(stepID, output)
		s.sayVoided(voided, endedUnasked)
		s.progress("step %s finished (%s)", stepID, plural(calls, "tool call"))
	}
	ls.end, ls.ended = end, ended
	if check != nil {
		ls.endFailed = func(ctx context.Context, aerr error) (Outcome, bool, error) {
			// The transaction has returned: every record the step
			// queued has its outcome.
			if ferr := c.Flush(); ferr != nil {
				o, serr := s.failStep(ctx, runID, stepID, attempt, ferr.Error(), false)
				return o, true, errors.Join(ferr, serr)
			}
			if !errors.Is(aerr, errOpenCalls) && !errors.Is(aerr, errQueuedRecord) {
				return Outcome{}, true, aerr
			}
			if o, done, err := s.resolveCalls(ctx, c, runID, stepID, attempt); done {
				return o, true, err
			}
			// Its records durable and its calls resolved: the end as
			// it was before this check.
			check = nil
			ls.end, ls.ended = end, ended
			return Outcome{}, false, nil
		}
	}
	return playbook.Str(si.step.Next), Outcome{}, false, nil
}

// resolveCalls is [Caller.resolve] at a step's end: done when the step
// waits for a person (suspended) or failed, with the loop's outcome.
func (s *Session) resolveCalls(ctx context.Context, c *Caller, runID, stepID string, attempt int) (Outcome, bool, error) {
	rerr := c.resolve(ctx)
	switch {
	case errors.Is(rerr, driver.ErrSuspended):
		o, err := s.suspend(ctx, runID, stepID, attempt)
		return o, true, err
	case rerr != nil:
		o, ferr := s.failStep(ctx, runID, stepID, attempt, rerr.Error(), false)
		return o, true, errors.Join(rerr, ferr)
	}
	return Outcome{}, false, nil
}

// failStep ends a step attempt and its run as failed; transient says the
// failure may pass on a new attempt ([driver.Transient]), which
// [Session.Retry] starts.
func (s *Session) failStep(ctx context.Context, runID, stepID string, attempt int, reason string, transient bool) (Outcome, error) {
	reason = s.opt.Redact(reason)
	var voided []store.Approval
	err := s.opt.Store.Tx(ctx, func(tx store.Tx) error {
		if err := tx.FinishStep(runID, stepID, attempt, store.StepFailed, nil, reason); err != nil {
			return err
		}
		var err error
		if voided, err = s.endApprovals(tx, runID, stepID, attempt, nil); err != nil {
			return err
		}
		if err := tx.SetRunStatus(runID, store.RunFailed, fmt.Sprintf("step %s failed: %s", stepID, reason)); err != nil {
			return err
		}
		if err := s.append(tx, runID, stepID, "", StepFailed{Attempt: attempt, Reason: reason, Transient: transient}); err != nil {
			return err
		}
		return s.append(tx, runID, stepID, "", RunFailed{Reason: "step " + stepID + " failed"})
	})
	if err == nil {
		s.sayVoided(voided, endedUnasked)
	}
	s.progress("step %s failed: %s", stepID, reason)
	s.progress("run %s failed", runID)
	return Outcome{Status: Failed, Reason: fmt.Sprintf("step %s failed: %s", stepID, reason), Retry: transient}, err
}

// suspend records that a step waits for a person and returns what it
// waits for.
func (s *Session) suspend(ctx context.Context, runID, stepID string, attempt int) (Outcome, error) {
	err := s.opt.Store.Tx(ctx, func(tx store.Tx) error {
		if err := tx.SetStepWaiting(runID, stepID, attempt); err != nil {
			return err
		}
		if err := tx.SetRunStatus(runID, store.RunWaiting, "step "+stepID+" waits for a person's decision"); err != nil {
			return err
		}
		return s.append(tx, runID, stepID, "", RunWaiting{Attempt: attempt})
	})
	if err != nil {
		return Outcome{}, err
	}
	return s.waitingOutcome(ctx, runID)
}

// AgentWaitReason is the reason of a run whose executing step waits for
// its external agent (an MCP client, driver "mcp") to connect.
func AgentWaitReason(stepID string) string {
	return "step " + stepID + " waits for its agent (an MCP client) to connect"
}

// awaitAgent records that a step waits for its external agent: the run
// waits (a [Pending] of kind "agent") until it is resumed with an agent
// connected.
func (s *Session) awaitAgent(ctx context.Context, runID, stepID string, attempt int) (Outcome, error) {
	// Recorded even when ctx ended (the server is stopping): the run is
	// left waiting, not running.
	ctx = context.WithoutCancel(ctx)
	err := s.opt.Store.Tx(ctx, func(tx store.Tx) error {
		if err := tx.SetStepWaiting(runID, stepID, attempt); err != nil {
			return err
		}
		if err := tx.SetRunStatus(runID, store.RunWaiting, AgentWaitReason(stepID)); err != nil {
			return err
		}
		return s.append(tx, runID, stepID, "", RunWaiting{Attempt: attempt, Agent: true})
	})
	if err != nil {
		return Outcome{}, err
	}
	s.progress("step %s waits for its agent (an MCP client) to connect", stepID)
	return s.waitingOutcome(ctx, runID)
}

// StepInput is what a step's agent sees: the step's purpose, the run's
// input, the outputs of the steps done before it and only the step's
// allowed tools that resolve. An external agent (an MCP client) is given
// the same.
func (s *Session) StepInput(ctx context.Context, runID, stepID string) (driver.StepInput, error) {
	si := s.im.steps[stepID]
	if si == nil {
		return driver.StepInput{}, fmt.Errorf("step %s is not a step of this playbook", quote(stepID))
	}
	run, err := s.opt.Store.GetRun(ctx, runID)
	if err != nil {
		return driver.StepInput{}, err
	}
	steps, err := s.opt.Store.Steps(ctx, runID)
	if err != nil {
		return driver.StepInput{}, err
	}
	// The calls the executing attempt already made, for a resumed step.
	attempt := 0
	for _, st := range steps {
		if st.Step == stepID && (st.Status == store.StepRunning || st.Status == store.StepWaiting) && st.Attempt > attempt {
			attempt = st.Attempt
		}
	}
	return s.stepInput(ctx, run, stepID, attempt, &loopState{prior: priorOutputs(steps)})
}

// stepInput is [Session.StepInput] of attempt (0: none executing) with
// the outputs of the steps done carried in ls.
func (s *Session) stepInput(ctx context.Context, run store.Run, stepID string, attempt int, ls *loopState) (driver.StepInput, error) {
	runID, si := run.ID, s.im.steps[stepID]
	in := driver.StepInput{
		RunID: runID, StepID: stepID, Agent: playbook.Str(si.step.Agent), Purpose: playbook.Str(si.step.Purpose),
		Input: run.Input, MaxCalls: s.opt.MaxToolCalls,
	}
	// A list of its own: what the driver does with it does not reach the
	// next step's.
	if len(ls.prior) > 0 {
		in.Prior = append([]driver.Prior(nil), ls.prior...)
	}
	for _, name := range si.names {
		ti := s.im.tools[name]
		if ti == nil || !ti.resolved {
			continue
		}
		in.Tools = append(in.Tools, driver.Tool{Name: name, Description: ti.def.Description, InputSchema: ti.def.InputSchema})
	}
	if attempt > 0 {
		// A retried attempt: the calls of the failed attempts it retries
		// that ran, with their outcomes, come first.
		prior, err := s.retriedCalls(ctx, runID, stepID, attempt)
		if err != nil {
			return driver.StepInput{}, err
		}
		for _, c := range prior {
			if !ran(c) {
				continue // refused or unanswered: asked again, it is decided again
			}
			res := driver.Result{Content: c.Result}
			if c.State == store.CallFailed {
				res = driver.Result{Error: c.Error}
			}
			in.Made = append(in.Made, driver.MadeCall{ID: fmt.Sprintf("made_a%d_%d", c.Attempt, c.Index), Name: c.Tool, Arguments: c.Args, Result: res})
		}
		var calls []store.Call
		if !ls.fresh {
			// An attempt the loop started has made no call yet.
			if calls, err = s.opt.Store.Calls(ctx, runID, store.CallFilter{Step: stepID, Attempt: attempt}); err != nil {
				return driver.StepInput{}, err
			}
		}
		for _, c := range calls {
			var res driver.Result
			switch c.State {
			case store.CallSucceeded:
				res.Content = c.Result
			case store.CallFailed:
				res.Error = c.Error
			case store.CallRefused:
				res.Error = c.Reason
			default:
				continue // no answer yet: asked again, it is answered then
			}
			in.Made = append(in.Made, driver.MadeCall{ID: fmt.Sprintf("made_%d", c.Index), Name: c.Tool, Arguments: c.Args, Result: res})
		}
	}
	return in, nil
}

// endApprovals expires the approvals asked in a step attempt that were
// not used: an approval never outlives its attempt. It returns them, for
// [Session.sayVoided] once the transaction committed. Their records are
// added to later, or appended at once when later is nil.
func (s *Session) endApprovals(tx store.Tx, runID, stepID string, attempt int, later *appendLater) ([]store.Approval, error) {
	const why = "the step attempt it was asked in ended"
	gone, err := tx.ExpireAttemptApprovals(runID, stepID, attempt, why)
	if err != nil {
		return nil, err
	}
	for _, a := range gone {
		idx := -1
		if a.Call != nil {
			idx = a.Call.Index
		}
		ev := ApprovalVoided{Approval: a.ID, Attempt: attempt, Index: idx, Reason: why}
		if later != nil {
			later.add(stepID, a.Tool, ev)
		} else if err := s.append(tx, runID, stepID, a.Tool, ev); err != nil {
			return nil, err
		}
	}
	return gone, nil
}
