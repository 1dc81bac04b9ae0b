package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/store"
)

// errUnresolved is wrapped by the error of [Caller.resolve] when a call of
// the attempt still waits for a person: the step waits instead of ending.
var errUnresolved = fmt.Errorf("%w: a call of the step has no known outcome yet", driver.ErrSuspended)

// resolve is what runs before a step attempt may end: no call of it may
// be left without an outcome (started, or outcome-unknown without a
// person's decision followed). The agent may never ask such a call again
// (it went on without its answer); then:
//
//   - a started side-effecting call is outcome-unknown (it was sent, and
//     nothing says what happened): a person is asked, and the step waits;
//   - an outcome-unknown call follows its decision as when it is asked
//     again: approved, it runs once more and its outcome is recorded;
//     denied, it is recorded as failed; undecided, the step waits;
//   - a started read call (one that needed approval and was interrupted)
//     is recorded as failed: a read has no effect to ask about.
//
// The same holds for the outcome-unknown calls of the failed attempts a
// retried attempt retries ([Caller.rerunPrior]).
//
// It returns an error wrapping [driver.ErrSuspended] when the step must
// wait for a person, or a store error (the step then fails).
func (c *Caller) resolve(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.settle(true); err != nil {
		return c.failRecord(err)
	}
	open := []store.CallState{store.CallStarted, store.CallOutcomeUnknown}
	calls, err := c.s.opt.Store.Calls(ctx, c.run, store.CallFilter{Step: c.step, Attempt: c.attempt, States: open})
	if err != nil {
		return c.failRecord(err)
	}
	for i := range calls {
		m := &calls[i]
		d := c.s.im.Decide(c.step, m.Tool, m.Args)
		switch {
		case m.State == store.CallStarted && !c.inFlight(*m):
			if _, err := c.failStarted(ctx, m, "the call was interrupted before its outcome was recorded, with nothing of it applied, and the agent did not ask it again; it was not run again"); err != nil {
				return err
			}
		case m.State == store.CallStarted:
			if _, err := c.lost(ctx, m.CallKey, m.Tool, errors.New("the step's agent ended the step without its answer")); err != nil && !errors.Is(err, driver.ErrSuspended) {
				return err
			}
		case d.ArgsDigest != m.ArgsDigest:
			// The recorded arguments are not what the agent sent (a
			// secret in them was redacted): only the agent asking it
			// again can run it again; a person's decision still settles
			// it (see unrunnable).
			if _, err := c.unrunnable(ctx, m); err != nil {
				return err
			}
		default:
			if _, err := c.outcomeUnknown(ctx, m, d); err != nil && !errors.Is(err, driver.ErrSuspended) {
				return err
			}
		}
	}
	// The failed attempts this one retries: a call of theirs whose
	// outcome is unknown follows its decision too (see rerunPrior).
	for i := range c.prior {
		m := c.prior[i]
		if !c.unsettled(m) {
			continue
		}
		d := c.s.im.Decide(c.step, m.Tool, m.Args)
		if d.ArgsDigest != m.ArgsDigest || !d.Allowed || d.tool == nil {
			// It cannot be run again from its record: a person's
			// decision settles it (see unrunnable), or it stays in left
			// below.
			if m.State == store.CallOutcomeUnknown {
				done, err := c.unrunnable(ctx, &c.prior[i])
				if err != nil {
					return err
				}
				if done {
					c.prior[i].State = store.CallFailed
				}
			}
			continue
		}
		c.priorUsed[i] = true
		if _, err := c.rerunPrior(ctx, i, m.Tool, d); err != nil && !errors.Is(err, driver.ErrSuspended) {
			return err
		}
	}
	if err := c.settle(true); err != nil {
		return c.failRecord(err)
	}
	left, err := c.s.opt.Store.Calls(ctx, c.run, store.CallFilter{Step: c.step, Attempt: c.attempt, States: open})
	if err != nil {
		return c.failRecord(err)
	}
	for _, m := range c.prior {
		if c.unsettled(m) {
			left = append(left, m)
		}
	}
	if len(left) > 0 {
		m := left[0]
		c.s.progress("  step %s waits: call %d of attempt %d (%s) has no known outcome; a person decides whether it runs again", c.step, m.Index, m.Attempt, quote(m.Tool))
		return fmt.Errorf("%w (call %d of attempt %d, %s)", errUnresolved, m.Index, m.Attempt, quote(m.Tool))
	}
	return nil
}

// failRecord remembers a store failure met while resolving the step's
// calls, so the step fails closed.
func (c *Caller) failRecord(err error) error {
	if c.storeErr == nil {
		c.storeErr = fmt.Errorf("the runtime could not record a tool call: %w", err)
	}
	return c.storeErr
}

// unrunnableReason is the error of an outcome-unknown call a person
// approved running again that the runtime could not run again: its
// arguments as sent held a secret value, which is stored redacted, and
// its agent ended the step without asking it again.
const unrunnableReason = "the outcome of this call is unknown; a person approved running it again, but its arguments held a secret value, which is not stored, and its agent did not ask it again, so it was not run again"

// unrunnable settles an outcome-unknown call m (of this attempt or of a
// failed attempt it retries) that cannot be run again from its record
// (its stored arguments are redacted) and that its agent did not ask
// again, by the person's decision on it: denied, it is recorded as failed
// (as [Caller.outcomeUnknown] does); approved, the approval cannot be
// followed: it is voided (approval.voided, said on the progress output)
// and the call is recorded as failed with [unrunnableReason], so it is
// never sent with arguments it was not asked with and the step does not
// wait for a decision already taken. Undecided, nothing changes. The
// decision is read in the transaction that settles it. It reports
// whether the call was settled.
func (c *Caller) unrunnable(ctx context.Context, m *store.Call) (bool, error) {
	var (
		settled bool
		voided  []store.Approval
	)
	err := c.tx(ctx, func(tx store.Tx) error {
		settled, voided = false, nil
		all, err := tx.Approvals(c.run)
		if err != nil {
			return err
		}
		for _, a := range all {
			if a.Kind != store.KindOutcomeUnknown || a.Call == nil || *a.Call != m.CallKey {
				continue
			}
			switch a.Status {
			case store.ApprovalDenied:
				if err := tx.FinishCall(m.CallKey, store.CallFailed, nil, deniedReason); err != nil {
					return err
				}
				settled = true
				return c.append(tx, m.Tool, CallFailed{Attempt: m.Attempt, Index: m.Index, Approval: a.ID, Reason: deniedReason})
			case store.ApprovalApproved:
				v, ok, err := tx.VoidOutcomeUnknownApproval(a.ID, unrunnableReason)
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("store: approval %s of call %d of attempt %d is no longer approved", a.ID, m.Index, m.Attempt)
				}
				if err := c.append(tx, m.Tool, ApprovalVoided{Approval: a.ID, Attempt: m.Attempt, Index: m.Index, Reason: unrunnableReason}); err != nil {
					return err
				}
				if err := tx.FinishCall(m.CallKey, store.CallFailed, nil, unrunnableReason); err != nil {
					return err
				}
				settled, voided = true, []store.Approval{v}
				return c.append(tx, m.Tool, CallFailed{Attempt: m.Attempt, Index: m.Index, Approval: a.ID, Reason: unrunnableReason})
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	if len(voided) > 0 {
		c.s.sayVoided(voided, "its arguments held a secret value, which is not stored, and its agent did not ask it again")
	}
	return settled, nil
}

// unsettled reports whether m, a call of a failed attempt this one
// retries, may have had an effect nobody decided on: outcome-unknown and
// side-effecting, or still started and in flight ([inFlight]).
func (c *Caller) unsettled(m store.Call) bool {
	switch m.State {
	case store.CallOutcomeUnknown:
		return c.sideEffecting(m)
	case store.CallStarted:
		return c.inFlight(m)
	}
	return false
}
