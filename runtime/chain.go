package runtime

import (
	"unicode/utf8"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// chain is what a run's audit records say its rows hold, gathered in one
// walk of the records ([readChain]) so that each row is then compared
// with it in constant time: [Reconcile], [Pendings] and [Decide] read
// the log once, however many rows the run has.
type chain struct {
	created    *audit.Record // run.created, nil when the log does not begin with it
	createdD   recordData
	lastEnd    EventKind // the last run.completed, run.failed or run.rejected since the last run.retried
	lastEndSeq int64
	// waiting is the last run.waiting when no run.resumed or run.retried
	// came after it: the run waits.
	waiting   at
	end       at     // the log's last record
	current   string // the step the last step.started or step.retried started
	currentAt at
	// currentKey is the step attempt current names.
	currentKey attemptKey
	calls      map[callKey]*chainCall
	approvals  map[string]*chainApproval
	gates      map[attemptKey]*chainGate
	steps      map[attemptKey]*chainStep
	// order keeps the keys in the order their first record came, so that
	// what the store lacks is reported in log order.
	callOrder     []callKey
	approvalOrder []string
	gateOrder     []attemptKey
	stepOrder     []attemptKey
	n             int64 // the records walked

	// For a walk whose calls are compared as they end ([callMerge]):
	// unordered keeps no callOrder; lastKey and lastCall are the call
	// the last record named (lastCall nil when it named none); keep
	// names the calls an
	// outcome-unknown approval was asked for, whose state kept holds
	// once it leaves calls.
	unordered bool
	lastKey   callKey
	lastCall  *chainCall
	keep      map[callKey]bool
	kept      map[callKey]*chainCall
}

type callKey struct {
	step           string
	attempt, index int
}

type attemptKey struct {
	step    string
	attempt int
}

// at is the audit record a value was taken from.
type at struct {
	seq  int64
	kind EventKind
}

// firstCallData is what reconciliation reads of a call's first record's
// data (a long log keeps one per call: only these).
type firstCallData struct {
	DefDigest, ArgsDigest, StoredArgsDigest string
	SideEffecting                           bool
}

// chainCall is what a call's records say of its row.
type chainCall struct {
	first  at // call.started, call.refused or call.waiting: the row's creation
	tool   string
	firstD firstCallData
	// decided is the last call.started, call.refused or call.waiting:
	// the row's decision (and, when refused, its code).
	decided at
	code    string
	last    at // the last call record: the row's state
	// args is the last arguments digest a record of the call gave.
	args      string
	argsAt    at
	result    string // call.succeeded's result digest
	resultAt  at
	failure   string // the last call.failed's reason
	failureAt at
	// reason is the reason of the last call.started (not on an
	// approval: that keeps the waiting reason), call.refused or
	// call.waiting; unknown is set once call.outcome-unknown, which
	// records no reason, rewrote it.
	reason   string
	reasonAt at
	unknown  bool
}

// chainApproval is what an approval's records say of its row.
type chainApproval struct {
	asked    audit.Record // approval.requested or call.outcome-unknown
	askedD   recordData
	status   store.ApprovalStatus
	statusAt at
	by       string // who decided, from approval.approved or approval.denied
	byAt     at
	uses     int // calls that ran on it (call.started, call.rerun)
	// reason is the row's reason: why it was asked (approval.requested),
	// then why it was decided or voided; reasonKnown is false while an
	// outcome-unknown approval, whose record carries no reason, is
	// undecided.
	reason      string
	reasonAt    at
	reasonKnown bool
}

// chainGate is what a gate's records say of its row.
type chainGate struct {
	opened   at
	status   store.GateStatus
	statusAt at
	by       string
	reason   string
}

// chainStep is what a step attempt's records say of its row.
type chainStep struct {
	started  at
	status   store.StepStatus
	statusAt at
	// gate is set once a gate.approved or gate.rejected decided the
	// attempt: its row is waiting until a resume follows the decision,
	// done after.
	gate      *chainGate
	output    string // step.finished's output digest
	outputAt  at
	finished  bool
	failure   string // step.failed's reason
	failureAt at
}

// readChain walks a run's records once.
func readChain(recs []audit.Record) *chain {
	c := newChain()
	for i := range recs {
		c.add(&recs[i])
	}
	return c
}

// newChain returns the walk of an empty log; [chain.add] takes the
// records one at a time, in order, so that a log read in pages is
// walked without holding it whole.
func newChain() *chain {
	return &chain{
		calls:     map[callKey]*chainCall{},
		approvals: map[string]*chainApproval{},
		gates:     map[attemptKey]*chainGate{},
		steps:     map[attemptKey]*chainStep{},
	}
}

// add walks the log's next record; what c keeps of it is copied.
func (c *chain) add(r *audit.Record) {
	c.lastCall = nil
	k := EventKind(r.Kind)
	d := dataOf(*r)
	here := at{r.Seq, k}
	first := c.n == 0
	c.n++
	c.end = here
	if first && k == KindRunCreated {
		rc := *r
		c.created, c.createdD = &rc, d
	}
	switch k {
	case KindRunCompleted, KindRunFailed, KindRunRejected:
		c.gateFollowed(here)
		c.lastEnd, c.lastEndSeq = k, r.Seq
	case KindRunRetried:
		c.lastEnd, c.lastEndSeq = "", r.Seq
	}
	switch k {
	case KindRunWaiting:
		c.waiting = here
	case KindRunResumed, KindRunRetried:
		c.waiting = at{}
	}
	if d.Attempt != nil {
		c.stepRecord(r, d, here)
	}
	if isCallKind(k) && d.Attempt != nil && d.Index != nil {
		c.callRecord(r, d, here)
	}
	if d.Approval != "" {
		c.approvalRecord(r, d, here)
	}
}

func (c *chain) stepRecord(r *audit.Record, d recordData, here at) {
	key := attemptKey{r.Step, *d.Attempt}
	s := c.steps[key]
	switch here.kind {
	case KindStepStarted, KindStepRetried:
		c.gateFollowed(here)
		c.current, c.currentAt, c.currentKey = r.Step, here, key
		if s == nil {
			s = &chainStep{started: here}
			c.steps[key] = s
			c.stepOrder = append(c.stepOrder, key)
		}
		s.status, s.statusAt = store.StepRunning, here
		return
	case KindGateWaiting:
		if c.gates[key] == nil {
			c.gates[key] = &chainGate{opened: here, status: store.GateWaiting, statusAt: here}
			c.gateOrder = append(c.gateOrder, key)
		}
	case KindGateApproved, KindGateRejected:
		if g := c.gates[key]; g != nil {
			g.status, g.statusAt, g.by, g.reason = store.GateApproved, here, d.By, d.Reason
			if here.kind == KindGateRejected {
				g.status = store.GateRejected
			}
			if s != nil {
				s.gate = g
			}
		}
	}
	if s == nil {
		return
	}
	switch here.kind {
	case KindStepResumed:
		s.status, s.statusAt = store.StepRunning, here
	case KindRunWaiting, KindGateWaiting:
		s.status, s.statusAt = store.StepWaiting, here
	case KindStepFinished:
		s.status, s.statusAt = store.StepDone, here
		s.finished, s.output, s.outputAt = true, d.OutputDigest, here
	case KindStepFailed:
		s.status, s.statusAt = store.StepFailed, here
		s.failure, s.failureAt = d.Reason, here
	}
}

// gateFollowed: the run went on past the current step (another step
// started, or the run ended). A gate step whose decision was recorded
// is done by then: its decision was followed.
func (c *chain) gateFollowed(here at) {
	if s := c.steps[c.currentKey]; s != nil && s.gate != nil && s.status == store.StepWaiting {
		s.status, s.statusAt = store.StepDone, here
	}
}

func (c *chain) callRecord(r *audit.Record, d recordData, here at) {
	key := callKey{r.Step, *d.Attempt, *d.Index}
	cc := c.calls[key]
	first := cc == nil
	if first {
		cc = &chainCall{first: here, tool: r.Tool, firstD: firstCallData{d.DefDigest, d.ArgsDigest, d.StoredArgsDigest, d.SideEffecting}}
		c.calls[key] = cc
		if !c.unordered {
			c.callOrder = append(c.callOrder, key)
		}
	}
	c.lastKey, c.lastCall = key, cc
	cc.last = here
	if d.ArgsDigest != "" {
		cc.args, cc.argsAt = d.ArgsDigest, here
	}
	switch here.kind {
	case KindCallStarted, KindCallWaiting:
		cc.decided, cc.code = here, ""
		// A call started on an approval keeps the reason it waited
		// with, unless this record starts it (an outcome-unknown call
		// run again as a new call on a person's approval).
		if here.kind == KindCallWaiting || d.Approval == "" || first {
			cc.reason, cc.reasonAt = d.Reason, here
		}
	case KindCallRefused:
		cc.decided, cc.code = here, d.Code
		cc.reason, cc.reasonAt = d.Reason, here
	case KindCallOutcomeUnknown:
		cc.unknown = true
	case KindCallSucceeded:
		cc.result, cc.resultAt = d.ResultDigest, here
	case KindCallFailed:
		cc.failure, cc.failureAt = d.Reason, here
	}
}

func (c *chain) approvalRecord(r *audit.Record, d recordData, here at) {
	a := c.approvals[d.Approval]
	switch here.kind {
	case KindApprovalRequested, KindCallOutcomeUnknown:
		if a == nil {
			a = &chainApproval{asked: *r, askedD: d}
			c.approvals[d.Approval] = a
			c.approvalOrder = append(c.approvalOrder, d.Approval)
			if c.keep != nil && here.kind == KindCallOutcomeUnknown && d.Attempt != nil && d.Index != nil {
				c.keep[callKey{r.Step, *d.Attempt, *d.Index}] = true
			}
		}
		a.status, a.statusAt = store.ApprovalPending, here
		a.reason, a.reasonAt, a.reasonKnown = d.Reason, here, here.kind == KindApprovalRequested
		return
	}
	if a == nil {
		return
	}
	switch here.kind {
	case KindApprovalApproved:
		a.status, a.statusAt, a.by, a.byAt = store.ApprovalApproved, here, d.By, here
		a.reason, a.reasonAt, a.reasonKnown = d.Reason, here, true
	case KindApprovalDenied:
		a.status, a.statusAt, a.by, a.byAt = store.ApprovalDenied, here, d.By, here
		a.reason, a.reasonAt, a.reasonKnown = d.Reason, here, true
	case KindApprovalVoided:
		a.status, a.statusAt = store.ApprovalExpired, here
		a.reason, a.reasonAt, a.reasonKnown = d.Reason, here, true
	case KindCallStarted, KindCallRerun:
		a.status, a.statusAt = store.ApprovalUsed, here
		a.uses++
	}
}

// call is the state of the call k, also once a [callMerge] compared it
// when an approval needs it (keep); nil when the chain has none.
func (c *chain) call(k callKey) *chainCall {
	if cc := c.calls[k]; cc != nil {
		return cc
	}
	return c.kept[k]
}

// recordTool is the tool name an audit record gives for a call row's
// name (which is stored redacted): the name itself, quoted when it is
// not valid UTF-8 ([newRecord]).
func recordTool(stored string) string {
	if stored != "" && !utf8.ValidString(stored) {
		return quote(stored)
	}
	return stored
}

// storedArgsDigest is what a call's first record says of the arguments
// it stores: "" when their digest is argsDigest (nothing was redacted),
// else the digest of what is stored.
func storedArgsDigest(stored []byte, argsDigest string) string {
	if d := digest(stored); d != argsDigest {
		return d
	}
	return ""
}

// decisionOf is the call decision a decision record gives.
func decisionOf(k EventKind) store.Decision {
	switch k {
	case KindCallRefused:
		return store.DecisionRefused
	case KindCallWaiting:
		return store.DecisionWaiting
	}
	return store.DecisionAllowed
}
