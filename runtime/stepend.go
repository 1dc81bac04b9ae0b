package runtime

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// A step that finished is ended in the transaction of what follows it
// ([Session.advance]), and that transaction also carries the call
// records the step queued last when the store has not committed them
// yet: the store runs a [store.Store.Tx] function after every function
// queued before it, in the same transaction or once that function's
// outcome is known. The end then does not wait for its records' commit
// and commit again; it checks, in its own transaction, that every record
// the step queued is kept (queuedOK) and that no call of the attempt is
// left without an outcome, and fails (nothing of it kept) otherwise: the
// loop then takes the slow way ([Session.endFailed]).

// queuedRec is a function the [Caller] handed to [store.Store.Queue]:
// its outcome, and what the function itself returned in its
// transaction.
type queuedRec struct {
	q store.Queued
	// result is queuedNotRun until the function returned, then
	// queuedRan or queuedFailed.
	result atomic.Int32
}

const (
	queuedNotRun int32 = iota
	queuedRan
	queuedFailed
)

// ran records what the queued function returned.
func (p *queuedRec) ran(err error) {
	if err != nil {
		p.result.Store(queuedFailed)
	} else {
		p.result.Store(queuedRan)
	}
}

// errQueuedRecord is the error of a step end that shares its commit
// with call records of which one failed or was not run before it.
var errQueuedRecord = errors.New("a call record the step queued is not kept")

// errOpenCalls is the error of a step end in whose transaction a call
// of the attempt is still started or outcome-unknown.
var errOpenCalls = errors.New("a call of the step attempt has no recorded outcome")

// endCheck is what a step's end checks in its transaction when it does
// not wait for the step's queued records first: the records the Caller
// had queued when the step's agent was done.
type endCheck struct {
	run, step string
	attempt   int
	recs      []*queuedRec
	// failed is a queued record's failure known already.
	failed error
}

// endCheck returns the check of what c queued so far.
func (c *Caller) endCheck() *endCheck {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &endCheck{run: c.run, step: c.step, attempt: c.attempt, recs: slices.Clone(c.pending), failed: c.collected}
}

// retries reports whether c's attempt retries failed attempts (their
// calls are settled by [Caller.resolve]).
func (c *Caller) retries() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.prior) > 0
}

// ok runs in the step end's transaction: it fails with [errQueuedRecord]
// unless every record in e is kept with the transaction (committed
// before it, or run in it without an error), and with [errOpenCalls]
// when a call of the attempt is, as tx reads it, still started or
// outcome-unknown ([Caller.resolve] decides those).
func (e *endCheck) ok(tx store.Tx) error {
	if e.failed != nil {
		return fmt.Errorf("%w: %v", errQueuedRecord, e.failed)
	}
	if err := queuedOK(e.recs); err != nil {
		return err
	}
	open, err := tx.Calls(e.run, store.CallFilter{Step: e.step, Attempt: e.attempt, States: []store.CallState{store.CallStarted, store.CallOutcomeUnknown}})
	if err != nil {
		return err
	}
	if len(open) > 0 {
		return fmt.Errorf("%w (call %d, %s)", errOpenCalls, open[0].Index, quote(open[0].Tool))
	}
	return nil
}

// queuedOK reports, from inside a store function that runs after the
// queued functions recs, whether each is kept with it: an outcome known
// must be a commit; an outcome not known yet means the function ran in
// this transaction (the store answers a commit's functions only once it
// is durable), and it must have returned nil, its savepoint kept.
func queuedOK(recs []*queuedRec) error {
	for _, p := range recs {
		select {
		case <-p.q.Done():
			if err := p.q.Wait(); err != nil {
				return fmt.Errorf("%w: %v", errQueuedRecord, err)
			}
		default:
			switch p.result.Load() {
			case queuedRan:
			case queuedFailed:
				return fmt.Errorf("%w: it failed in the step end's transaction", errQueuedRecord)
			default:
				return fmt.Errorf("%w: it had not run when the step ended", errQueuedRecord)
			}
		}
	}
	return nil
}

// appendLater collects the audit records of one run a transaction
// appends, to append them with one [store.Tx.AppendAll] when it is
// done: the run's audit head moves once, not once per record. Records
// keep the order they were added in.
type appendLater struct {
	s    *Session
	run  string
	recs []audit.Record
}

func (s *Session) appendLater(run string) *appendLater { return &appendLater{s: s, run: run} }

// add is [Session.append] of ev, deferred to flush.
func (a *appendLater) add(step, tool string, ev Event) {
	a.recs = append(a.recs, newRecord(a.s.opt.Redact, a.run, step, tool, ev))
}

// flush appends the records added, in order.
func (a *appendLater) flush(tx store.Tx) error {
	if len(a.recs) == 0 {
		return nil
	}
	_, err := tx.AppendAll(a.recs...)
	a.recs = nil
	return err
}
