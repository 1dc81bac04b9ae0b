package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/drift"
	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/policy"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/store"
)

// Caller is the decision path for one attempt at one agent step: it is
// the [driver.Caller] the step's driver calls, and what anything else that
// acts as the step's agent (an MCP gateway, a test) calls. Get one with
// [Session.NewCaller].
//
// On resume it answers calls the attempt already made from the store
// (matched by exact tool name and arguments digest, in order), so nothing
// runs twice.
//
// A Caller is safe for concurrent use (an external agent may send calls
// at once): calls are decided and recorded one at a time, in the order
// they take the Caller's lock, and only a tool's execution and the live
// definition check run concurrently.
type Caller struct {
	mu      sync.Mutex // guards everything below; released while a tool executes
	s       *Session
	run     string
	step    string
	agent   string
	attempt int
	count   int // calls the agent made in this run of the step
	fresh   int // of them, calls not answered from memo

	memo   []store.Call // the attempt's recorded calls
	used   []bool
	loaded int // how many of memo were read from the store
	// replays is set when the step's driver is [driver.Deterministic]:
	// a resumed step's new side-effecting calls are not held back.
	replays bool
	// continues is set when the step's driver is [driver.Continuing]
	// (an external agent): a resumed step's new side-effecting calls are
	// held back only while an in-flight call to the same tool has not
	// been answered.
	continues bool
	// prior are the calls of the failed attempts this attempt retries
	// ([Session.Retry]); priorUsed marks those answered in this run of
	// the step.
	prior     []store.Call
	priorUsed []bool
	// input is the run's input, for the policy (read once: inputRead).
	input     jsontext.Value
	inputRead bool

	pending []*queuedRec // call records handed to the store, not known durable yet
	reads   *readGroup   // the read calls queued last, which the next may join
	// collected is the first failure of the records dropped from the
	// head of pending once settled (see collect), for settle to report.
	collected error

	// storeErr is set when a check failed because the store did: the
	// call was refused and the step must fail.
	storeErr error
}

// NewCaller returns the decision path of attempt attempt at step stepID
// of run runID, with the calls the attempt already made read from the
// store.
func (s *Session) NewCaller(ctx context.Context, runID, stepID string, attempt int) (*Caller, error) {
	return s.newCaller(ctx, runID, stepID, attempt, false)
}

// newCaller is [Session.NewCaller]; fresh says the attempt was just
// started by this process, which has made no call of it yet (so none is
// read).
func (s *Session) newCaller(ctx context.Context, runID, stepID string, attempt int, fresh bool) (*Caller, error) {
	var memo []store.Call
	if !fresh {
		var err error
		if memo, err = s.opt.Store.Calls(ctx, runID, store.CallFilter{Step: stepID, Attempt: attempt}); err != nil {
			return nil, err
		}
	}
	prior, err := s.retriedCalls(ctx, runID, stepID, attempt)
	if err != nil {
		return nil, err
	}
	c := &Caller{s: s, run: runID, step: stepID, attempt: attempt, memo: memo, used: make([]bool, len(memo)), loaded: len(memo),
		prior: prior, priorUsed: make([]bool, len(prior))}
	if si := s.im.steps[stepID]; si != nil {
		c.agent = playbook.Str(si.step.Agent)
	}
	if err := c.recoverInterrupted(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// interruptedReason is the reason of a side-effecting call found started
// when a step attempt is taken up again: the process that sent it
// stopped (or its store failed) before its outcome was recorded.
const interruptedReason = "the process stopped after the call started and before its outcome was recorded"

// recoverInterrupted marks the attempt's side-effecting calls that are
// still started as outcome-unknown, each with a pending decision, in one
// transaction, before the agent makes any call. One process executes a
// run (the run lock) and a new Caller has sent nothing yet, so a started
// call was in flight when its process (or its store) stopped: exactly
// those calls ask a person, whether or not the agent asks them again.
// A started read call is left as it is: asked again, it runs again.
func (c *Caller) recoverInterrupted(ctx context.Context) error {
	var idx []int
	for i, m := range c.memo {
		if m.State == store.CallStarted && c.inFlight(m) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	ids := make([]string, len(idx))
	err := c.s.opt.Store.Tx(ctx, func(tx store.Tx) error {
		for n, i := range idx {
			m := c.memo[i]
			ap, err := tx.MarkOutcomeUnknown(m.CallKey, interruptedReason)
			if err != nil {
				return err
			}
			ids[n] = ap.ID
			if err := c.append(tx, m.Tool, CallOutcomeUnknown{Attempt: c.attempt, Index: m.Index, Approval: ap.ID}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("run %s: recording the interrupted calls of step %s as outcome-unknown: %w", c.run, c.step, err)
	}
	for n, i := range idx {
		c.memo[i].State, c.memo[i].Reason = store.CallOutcomeUnknown, interruptedReason
		c.s.progress("  outcome of %s unknown: waiting for a person (%s)", quote(c.memo[i].Tool), ids[n])
	}
	return nil
}

// sideEffecting reports whether a recorded call may have had an effect
// when run: the row or the imported definition says so (a row edited to
// say "read" does not make a side effect safe to run again), or its name
// resolves to no tool of the document.
func (c *Caller) sideEffecting(m store.Call) bool {
	if m.SideEffecting {
		return true
	}
	ti := c.s.im.tools[m.Tool]
	return ti == nil || ti.sideEff
}

// inFlight reports whether a call recorded as started may have had an
// effect its record does not show (see [inFlight]).
func (c *Caller) inFlight(m store.Call) bool { return inFlight(c.s.im, m) }

// inFlight reports whether m, a call recorded as started, may have had
// an effect that its record does not show: it is side-effecting (its row
// or the imported definition says so, or its name resolves to no tool)
// and its effect is not in the runtime's own store. A built-in's effect
// is a change to the store made in one transaction with its outcome
// record (registry.Result.Commit), so a built-in call still started had
// none: it was interrupted before anything of it was applied.
func inFlight(im *Imported, m store.Call) bool {
	ti := im.tools[m.Tool]
	if !m.SideEffecting && ti != nil && !ti.sideEff {
		return false
	}
	return ti == nil || ti.entry.Origin.Kind != registry.Builtin
}

// Calls returns how many calls the agent made through c.
func (c *Caller) Calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

// runInput returns the run's input, read once (nil when it cannot be
// read: a policy condition then sees {}, and one that reads a member of
// it fails to evaluate, which refuses the call).
func (c *Caller) runInput(ctx context.Context) jsontext.Value {
	if !c.inputRead {
		c.inputRead = true
		if r, err := c.s.opt.Store.GetRun(ctx, c.run); err == nil {
			c.input = r.Input
		}
	}
	return c.input
}

// Err returns the store error that refused a call, if one did: the step
// must then fail.
func (c *Caller) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.storeErr
}

// Call is the single decision path; see the package documentation. It
// returns a Result for everything the agent should see (a refusal is a
// Result whose Error names the reason), and an error only when the step
// must stop: [driver.ErrSuspended], [driver.ErrCallLimit], or a store
// failure.
func (c *Caller) Call(ctx context.Context, call driver.Call) (driver.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count++
	if n := len(call.Name) + len(call.Arguments); n > c.s.opt.MaxArgumentBytes || len(call.Name) > maxNameBytes {
		// Nothing reads an oversized call: it is recorded by digest and
		// size, under its name or, past the format's 128-byte maximum,
		// only the name's size.
		name := shownName(call.Name)
		if res, err, over := c.overLimit(ctx, name); over {
			return res, err
		}
		d := Decision{ArgsDigest: digest(call.Arguments)}
		return c.refuse(ctx, name, d, CodeTooLarge, fmt.Sprintf(
			"the call to %s is %d bytes (name and arguments), over the limit of %d; the call was refused and not run", quote(name), n, c.s.opt.MaxArgumentBytes))
	}
	d := c.s.im.Decide(c.step, call.Name, call.Arguments)
	d.reasoning = call.Reasoning
	if i := c.match(call.Name, d.ArgsDigest); i >= 0 {
		was := c.memo[i].State
		unanswered := was == store.CallWaiting || was == store.CallStarted || was == store.CallOutcomeUnknown
		res, err := c.replay(ctx, &c.memo[i], d)
		switch {
		case errors.Is(err, driver.ErrSuspended):
			// Still waiting: the same call asked again (an external
			// agent polling its approval) matches it again.
			c.used[i] = false
		case err == nil && unanswered:
			// Decided and answered now (approved or denied, run again or
			// left): the record in memory follows the store, so the
			// same call asked again is answered from it and never
			// decided or run a second time. The agent may not have got
			// this answer (it asked, went away, asked again): the next
			// ask of the same call is given the same answer, once. A
			// transcript asks each call it means, so it is exempt.
			m := &c.memo[i]
			if res.Error != "" {
				m.State, m.Error = store.CallFailed, res.Error
			} else {
				m.State, m.Result = store.CallSucceeded, res.Content
			}
			if !c.replays {
				c.used[i] = false
			}
		}
		return res, err
	}
	if i := c.matchPriorLost(call.Name, d.ArgsDigest); i >= 0 {
		// A retried step asks a call of its failed attempt whose outcome
		// is unknown: it runs only on a person's approval, once.
		return c.rerunPrior(ctx, i, call.Name, d)
	}
	if i := c.matchPrior(call.Name, d.ArgsDigest); i >= 0 {
		// A retried step asks a call its failed attempt made and ran:
		// the recorded outcome answers it; it does not run again.
		m := c.prior[i]
		c.s.progress("  %s answered from attempt %d, which this attempt retries", quote(call.Name), m.Attempt)
		if m.State == store.CallFailed {
			return driver.Result{Error: m.Error}, nil
		}
		return driver.Result{Content: m.Result}, nil
	}
	if res, err, over := c.overLimit(ctx, call.Name); over {
		return res, err
	}
	if !d.Allowed {
		return c.refuse(ctx, call.Name, d, d.Code, d.Reason)
	}
	if d.tool.entry.Tool == nil {
		return c.refuse(ctx, call.Name, d, CodeUnavailable, fmt.Sprintf(
			"tool %s resolves to %s, but nothing connected runs it; the call was refused and not run", quote(call.Name), d.tool.entry.Origin))
	}
	// The live definition check may ask a server: others' calls go on
	// meanwhile.
	c.mu.Unlock()
	reason, live := c.confirm(ctx, d.tool)
	c.mu.Lock()
	if reason != "" {
		return c.refuse(ctx, call.Name, d, CodeDrifted, reason)
	}
	why := ""
	if d.tool.approval {
		why = ReasonRequiresApproval
	}
	var req *policy.Requirement
	if pol := c.s.opt.Policy; pol.Len() > 0 {
		v, err := c.askPolicy(ctx, d)
		req = v.Require
		switch {
		case err != nil:
			return c.refuse(ctx, call.Name, d, CodePolicy, fmt.Sprintf("%v; a policy that fails to evaluate refuses: the call was refused and not run", err))
		case v.Effect == policy.Deny:
			msg := fmt.Sprintf("policy rule %q refuses calls to %s", v.Rule, quote(call.Name))
			if v.Reason != "" {
				msg += ": " + v.Reason
			}
			return c.refuse(ctx, call.Name, d, CodePolicy, msg+"; the call was refused and not run")
		case v.Effect == policy.RequireApproval && why == "":
			why = ReasonPolicy + v.Rule
		}
	}
	if why != "" {
		return c.approvalGate(ctx, call.Name, d, nil, bindDigest(d.tool, live, c.attempt), why, req)
	}
	if d.tool.sideEff && !c.replays && c.ranBefore(call.Name) {
		// A resumed (or retried) step: a side-effecting call that matches
		// none of the recorded ones, to a tool that already ran in this
		// attempt (or in the failed attempt it retries), may be an
		// executed call reworded (a model asked again rephrases): a
		// person decides whether it is a new one.
		return c.approvalGate(ctx, call.Name, d, nil, bindDigest(d.tool, live, c.attempt), ReasonResumedSameTool, req)
	}
	if !d.tool.sideEff {
		// A read call is recorded with its outcome after it ran (queued:
		// see execute): if the process dies before that commit, nothing
		// was recorded and resume may run it again, which a read allows.
		return c.execute(ctx, nil, call.Name, d)
	}
	if _, ok := d.tool.entry.Tool.(registry.InStore); ok {
		// A built-in's effect is a change to the store: its start, the
		// change and its outcome are one transaction.
		return c.executeInStore(ctx, call.Name, d)
	}
	// A side-effecting call is recorded as started, durably, before it
	// runs, so a crash leaves a trace that makes resume ask a person
	// instead of running it again.
	var key store.CallKey
	err := c.tx(ctx, func(tx store.Tx) error {
		k, err := c.start(tx, call.Name, d, store.DecisionAllowed, "", "")
		key = k
		return err
	})
	if err != nil {
		return driver.Result{}, err
	}
	return c.execute(ctx, &key, call.Name, d)
}

// RecordUsage records what one model turn of the step cost, as a
// model.usage audit record: queued with the call records (durable by
// [Caller.Flush]), so it does not wait for a commit; a failure to record
// it fails the step, as for a call record. Negative counts are recorded
// as 0. It implements [driver.UsageRecorder].
func (c *Caller) RecordUsage(ctx context.Context, u driver.Usage) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.storeErr != nil {
		return c.storeErr
	}
	ev := ModelUsage{Attempt: c.attempt, Provider: u.Provider, Model: u.Model, Turn: u.Turn,
		InputTokens: max(u.InputTokens, 0), OutputTokens: max(u.OutputTokens, 0),
		CachedInputTokens: max(u.CachedInputTokens, 0), CacheWriteTokens: max(u.CacheWriteTokens, 0)}
	c.queue(ctx, func(tx store.Tx) error { return c.append(tx, "", ev) })
	return nil
}

var (
	_ driver.Caller        = (*Caller)(nil)
	_ driver.UsageRecorder = (*Caller)(nil)
)

// refuseReply records the calls of a model reply the driver refused whole
// as refused, with the reply's code: they never ran.
func (c *Caller) refuseReply(ctx context.Context, re *driver.ReplyError) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	reason := fmt.Sprintf("the model's reply stopped with %q (%s); none of its calls ran", re.StopReason, re.Reason)
	return c.tx(ctx, func(tx store.Tx) error {
		for _, call := range re.Calls {
			name := shownName(call.Name)
			d := Decision{ArgsDigest: digest(call.Arguments)}
			if _, err := c.start(tx, name, d, store.DecisionRefused, Code(re.Code), reason); err != nil {
				return err
			}
		}
		return nil
	})
}

// overLimit counts a new call against the step's limit, which bounds the
// attempt's calls: those recorded before this run of the step (an agent
// asked again on resume need not repeat them) and the new ones, refused
// ones included. Over it, the step stops.
func (c *Caller) overLimit(ctx context.Context, name string) (driver.Result, error, bool) {
	c.fresh++
	if len(c.memo)+c.fresh <= c.s.opt.MaxToolCalls {
		return driver.Result{}, nil, false
	}
	err := c.tx(ctx, func(tx store.Tx) error {
		return c.s.append(tx, c.run, c.step, name, StepCallLimit{Limit: c.s.opt.MaxToolCalls})
	})
	return driver.Result{}, errors.Join(fmt.Errorf("%w (%d calls)", driver.ErrCallLimit, c.s.opt.MaxToolCalls), err), true
}

// tx runs fn in a store transaction; a failure, its own or one of the
// outcomes queued before it (the store commits in order, so they are
// settled when it returns), is remembered so the step fails closed.
func (c *Caller) tx(ctx context.Context, fn func(store.Tx) error) error {
	err := c.s.opt.Store.Tx(ctx, fn)
	if err == nil {
		err = c.settle(false)
	}
	if err != nil {
		if c.storeErr == nil {
			c.storeErr = fmt.Errorf("the runtime could not record a tool call, so it was refused: %w", err)
		}
		return c.storeErr
	}
	return nil
}

// queue hands fn to the store without waiting for its commit. What fn
// returned in its transaction is kept beside its outcome, for a step's
// end that shares its commit ([endCheck]).
func (c *Caller) queue(ctx context.Context, fn func(store.Tx) error) {
	c.reads = nil // what is queued after fn must not be recorded before it
	c.collect()
	p := &queuedRec{}
	p.q = c.s.opt.Store.Queue(context.WithoutCancel(ctx), func(tx store.Tx) error {
		err := fn(tx)
		p.ran(err)
		return err
	})
	c.pending = append(c.pending, p)
}

// maxReadGroup bounds the read calls recorded by one queued function.
const maxReadGroup = 64

// readGroup is consecutive read calls recorded by one queued function
// (in one savepoint of the commit they share). A call joins the group
// the Caller queued last while the store has not started recording it
// and nothing else was queued since, so the records keep their order;
// otherwise it starts a new group.
type readGroup struct {
	q     *queuedRec // the queued function
	mu    sync.Mutex
	taken bool // the store has started recording the group
	rs    []readRecord
}

// queueRead hands a read call's record to the store without waiting for
// its commit, with the read calls queued just before it when the store
// has not started on them yet. The group succeeds or fails as one: a
// failure is the step's either way (see settle).
func (c *Caller) queueRead(ctx context.Context, r readRecord) {
	if g := c.reads; g != nil && !settled(g.q.q) {
		g.mu.Lock()
		joined := !g.taken && len(g.rs) < maxReadGroup
		if joined {
			g.rs = append(g.rs, r)
		}
		g.mu.Unlock()
		if joined {
			return
		}
	}
	g := &readGroup{rs: []readRecord{r}}
	c.queue(ctx, func(tx store.Tx) error {
		g.mu.Lock()
		g.taken = true
		rs := g.rs
		g.mu.Unlock()
		return c.recordReads(tx, rs)
	})
	g.q = c.pending[len(c.pending)-1]
	c.reads = g
}

// collect drops the records at the head of pending that are settled
// already, keeping the first failure among them for settle: a step of
// many read calls (which only queue) does not hold every call's record,
// its arguments and result, in memory until it ends. What settle reports
// is unchanged: those records come before the ones it still looks at.
func (c *Caller) collect() {
	n := 0
	for _, p := range c.pending {
		if !settled(p.q) {
			break
		}
		if err := p.q.Wait(); err != nil && c.collected == nil {
			c.collected = err
		}
		n++
	}
	if n > 0 {
		rest := copy(c.pending, c.pending[n:])
		clear(c.pending[rest:])
		c.pending = c.pending[:rest]
	}
}

// settled reports whether q's outcome is known.
func settled(q store.Queued) bool {
	select {
	case <-q.Done():
		return true
	default:
		return false
	}
}

// settle collects the outcomes of the queued records: with wait, it
// waits for all of them; without, it takes those already settled. It
// returns the first failure.
func (c *Caller) settle(wait bool) error {
	first := c.collected
	c.collected = nil
	kept := c.pending[:0]
	for _, p := range c.pending {
		if !wait {
			select {
			case <-p.q.Done():
			default:
				kept = append(kept, p)
				continue
			}
		}
		if err := p.q.Wait(); err != nil && first == nil {
			first = err
		}
	}
	clear(c.pending[len(kept):])
	c.pending = kept
	return first
}

// Flush waits until every call record the Caller queued is durable, and
// returns the first that failed (the step must then fail; [Caller.Err]
// says so too). The runtime calls it when a step's agent is done; an
// external agent's host must call it before it ends the step.
func (c *Caller) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.settle(true); err != nil && c.storeErr == nil {
		c.storeErr = fmt.Errorf("the runtime could not record a tool call: %w", err)
	}
	return c.storeErr
}

func (c *Caller) append(tx store.Tx, tool string, ev Event) error {
	return c.s.append(tx, c.run, c.step, tool, ev)
}

// Why a call waits for a person's approval (the reason of its approval
// request and call.waiting record).
const (
	// ReasonRequiresApproval: the tool's definition says requiresApproval.
	ReasonRequiresApproval = "requiresApproval"
	// ReasonPolicy, followed by the rule's name: a rule of the harness's
	// policy requires an approval of the call.
	ReasonPolicy = "policy:"
	// ReasonResumedSameTool: in a resumed (or retried) step, a
	// side-effecting call that matches none of the attempt's recorded
	// calls (or those of the failed attempt it retries) by name and
	// arguments, to a tool a recorded call already ran (docs/drivers.md,
	// "Resumed steps").
	ReasonResumedSameTool = "resumed-same-tool"
)

// storedName is a tool name as the agent sends it, the way call rows
// store it: with secret values redacted ([Caller.start]). The agent's
// calls are compared with the recorded ones under it, so that a name
// that holds a secret value (a short one: an account or database name)
// still matches its own record and is never taken for a new call and
// sent again. Two names that store alike are taken for the same tool:
// an answer from the other's record, never a second send.
func (c *Caller) storedName(name string) string { return c.s.opt.Redact(name) }

// ranBefore reports whether a call to name that this attempt made before
// this run of the step (read from the store), or a failed attempt this
// one retries made, ran, or may have: it succeeded, failed after it was
// sent, started, or its outcome is unknown.
//
// For an agent that continues ([driver.Continuing]) it reports, of this
// attempt's calls, only one to name that was in flight when the step
// stopped (started or outcome-unknown) and has not been answered in this
// run of the step: the agent got every other answer itself, so its later
// calls are new ones, and exactly the interrupted calls ask a person.
func (c *Caller) ranBefore(name string) bool {
	name = c.storedName(name)
	mayHaveRun := func(m store.Call) bool {
		return m.Tool == name && (ran(m) || m.State == store.CallStarted || m.State == store.CallOutcomeUnknown)
	}
	for _, m := range c.memo[:c.loaded] {
		if c.continues && m.Tool == name && (m.State == store.CallStarted || m.State == store.CallOutcomeUnknown) {
			// Once answered in this run of the step, its record in
			// memory is no longer started or outcome-unknown (see
			// Call), and it no longer holds calls back.
			return true
		}
		if !c.continues && mayHaveRun(m) {
			return true
		}
	}
	for _, m := range c.prior {
		if mayHaveRun(m) {
			return true
		}
	}
	return false
}

// matchPrior returns the index in prior of the first call of a failed
// attempt this one retries that ran, not yet answered in this run of the
// step, with the same tool bytes and arguments digest, marking it
// answered; -1 when none is.
func (c *Caller) matchPrior(name, argsDigest string) int {
	name = c.storedName(name)
	for i, m := range c.prior {
		if !c.priorUsed[i] && ran(m) && m.Tool == name && m.ArgsDigest == argsDigest {
			c.priorUsed[i] = true
			return i
		}
	}
	return -1
}

// matchPriorLost returns the index in prior of the first call of a
// failed attempt this one retries whose outcome is unknown, not yet asked
// in this run of the step, with the same tool bytes and arguments digest,
// marking it asked; -1 when none is.
func (c *Caller) matchPriorLost(name, argsDigest string) int {
	name = c.storedName(name)
	for i, m := range c.prior {
		if !c.priorUsed[i] && (m.State == store.CallOutcomeUnknown || m.State == store.CallStarted) && m.Tool == name && m.ArgsDigest == argsDigest {
			c.priorUsed[i] = true
			return i
		}
	}
	return -1
}

// rerunPrior answers the ask of an outcome-unknown call of a failed
// attempt this one retries (the retry marked it so, see
// [Session.Retry]), following a person's decision on it. Approved, the
// approval is used: the old call is recorded failed (it is replaced),
// the call is recorded as a new call of this attempt, bound to the
// approval, and runs once. Denied, the old call is recorded failed and
// the agent is told; it does not run. Undecided, the step waits for the
// person (asked again, the call is this one again).
func (c *Caller) rerunPrior(ctx context.Context, i int, name string, d Decision) (driver.Result, error) {
	m := &c.prior[i]
	if reason := c.usable(ctx, d); reason != "" {
		c.priorUsed[i] = false
		c.s.progress("  not re-running %s: %s", quote(name), reason)
		return driver.Result{Error: c.s.opt.Redact(c.inStep(reason))}, nil
	}
	var (
		key    store.CallKey
		rerun  bool
		denied bool
		asked  string
	)
	replaced := fmt.Sprintf("its outcome is unknown; a person had it run again in attempt %d", c.attempt)
	err := c.tx(ctx, func(tx store.Tx) error {
		if m.State == store.CallStarted {
			ap, err := tx.MarkOutcomeUnknown(m.CallKey, lostReason)
			if err != nil {
				return err
			}
			m.State, asked = store.CallOutcomeUnknown, ap.ID
			return c.append(tx, m.Tool, CallOutcomeUnknown{Attempt: m.Attempt, Index: m.Index, Approval: ap.ID})
		}
		a, ok, err := tx.ConsumeApprovalFor(m.CallKey, m.DefDigest, m.ArgsDigest)
		if err != nil {
			return err
		}
		if !ok {
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
					denied = true
					if err := tx.FinishCall(m.CallKey, store.CallFailed, nil, deniedReason); err != nil {
						return err
					}
					return c.append(tx, m.Tool, CallFailed{Attempt: m.Attempt, Index: m.Index, Approval: a.ID, Reason: deniedReason})
				case store.ApprovalPending, store.ApprovalApproved:
					asked = a.ID
				}
			}
			if asked != "" {
				return nil
			}
			// Every decision on it was used: its approved re-run was
			// lost as well. A person decides again.
			ap, err := tx.CreateApproval(store.Approval{
				Kind: store.KindOutcomeUnknown, Run: c.run, Step: c.step, Tool: m.Tool, DefDigest: m.DefDigest, ArgsDigest: m.ArgsDigest,
				Call: &m.CallKey, Reason: "the call was run again and its outcome was never recorded",
			})
			if err != nil {
				return err
			}
			asked = ap.ID
			return c.append(tx, m.Tool, CallOutcomeUnknown{Attempt: m.Attempt, Index: m.Index, Approval: ap.ID})
		}
		if err := approvalRecorded(ctx, tx, a); err != nil {
			return err
		}
		if err := tx.FinishCall(m.CallKey, store.CallFailed, nil, replaced); err != nil {
			return err
		}
		if err := c.append(tx, m.Tool, CallFailed{Attempt: m.Attempt, Index: m.Index, Approval: a.ID, Reason: replaced}); err != nil {
			return err
		}
		why := fmt.Sprintf("call %d of attempt %d, whose outcome is unknown, run again on a person's approval (%s)", m.Index, m.Attempt, a.ID)
		got, err := tx.StartCall(store.Call{
			CallKey: store.CallKey{Run: c.run, Step: c.step, Attempt: c.attempt},
			Tool:    c.s.opt.Redact(name), DefDigest: d.tool.defDigest, Args: c.redactJSON(d.Args), ArgsDigest: d.ArgsDigest,
			Decision: store.DecisionAllowed, Reason: c.s.opt.Redact(why), SideEffecting: true,
		})
		if err != nil {
			return err
		}
		key, rerun = got.CallKey, true
		return c.append(tx, name, CallStarted{Index: key.Index, Attempt: c.attempt, ArgsDigest: d.ArgsDigest, StoredArgsDigest: storedArgsDigest(got.Args, d.ArgsDigest),
			DefDigest: d.tool.defDigest, SideEffecting: true, Approval: a.ID, Reason: why})
	})
	switch {
	case err != nil:
		return driver.Result{}, err
	case rerun:
		m.State, m.Error = store.CallFailed, replaced
		c.s.progress("  re-running %s (call %d of attempt %d) on a person's approval", quote(name), m.Index, m.Attempt)
		return c.execute(ctx, &key, name, d)
	case denied:
		m.State, m.Error = store.CallFailed, deniedReason
		c.s.progress("  not re-running %s: %s", quote(name), deniedReason)
		return driver.Result{Error: deniedReason}, nil
	}
	c.priorUsed[i] = false // asked again, it is this call again
	c.s.progress("  outcome of %s (call %d of attempt %d) unknown: waiting for a person (%s)", quote(name), m.Index, m.Attempt, asked)
	return driver.Result{}, &driver.PendingError{Approval: asked}
}

// match returns the index in memo of the first recorded call of this
// attempt, not yet answered in this run of the step, with the same tool
// bytes and arguments digest, marking it answered; -1 when none is.
func (c *Caller) match(name, argsDigest string) int {
	name = c.storedName(name)
	for i := range c.memo {
		if !c.used[i] && c.memo[i].Tool == name && c.memo[i].ArgsDigest == argsDigest {
			c.used[i] = true
			return i
		}
	}
	return -1
}

// start records a new call and its audit record: call.started,
// call.refused (with code) or call.waiting, by decision.
func (c *Caller) start(tx store.Tx, name string, d Decision, decision store.Decision, code Code, reason string) (store.CallKey, error) {
	redact := c.s.opt.Redact
	sc := store.Call{
		CallKey: store.CallKey{Run: c.run, Step: c.step, Attempt: c.attempt},
		// An agent may send a secret it was shown as a tool name: the
		// name is stored as received unless it holds one.
		Tool: redact(name), Args: c.redactJSON(d.Args), ArgsDigest: d.ArgsDigest,
		Decision: decision, Code: string(code), Reason: redact(reason),
	}
	var defDigest string
	if d.tool != nil {
		defDigest = d.tool.defDigest
		sc.DefDigest = defDigest
		sc.SideEffecting = d.tool.sideEff
	}
	got, err := tx.StartCall(sc)
	if err != nil {
		return store.CallKey{}, err
	}
	stored, sideEff := storedArgsDigest(sc.Args, d.ArgsDigest), sc.SideEffecting
	var ev Event
	switch decision {
	case store.DecisionRefused:
		ev = CallRefused{Index: got.Index, Attempt: c.attempt, ArgsDigest: d.ArgsDigest, StoredArgsDigest: stored, DefDigest: defDigest, SideEffecting: sideEff, Code: code, Reason: reason}
	case store.DecisionWaiting:
		ev = CallWaiting{Index: got.Index, Attempt: c.attempt, ArgsDigest: d.ArgsDigest, StoredArgsDigest: stored, DefDigest: defDigest, SideEffecting: sideEff, Reason: reason}
	default:
		ev = CallStarted{Index: got.Index, Attempt: c.attempt, ArgsDigest: d.ArgsDigest, StoredArgsDigest: stored, DefDigest: defDigest, SideEffecting: sideEff, Reason: reason}
	}
	return got.CallKey, c.append(tx, name, ev)
}

// refuse records a refused call; the agent gets the reason and may go on.
func (c *Caller) refuse(ctx context.Context, name string, d Decision, code Code, reason string) (driver.Result, error) {
	reason = c.inStep(reason)
	err := c.tx(ctx, func(tx store.Tx) error {
		_, err := c.start(tx, name, d, store.DecisionRefused, code, reason)
		return err
	})
	if err != nil {
		return driver.Result{}, err
	}
	c.s.progress("  refused %s: %s", quote(name), reason)
	return driver.Result{Error: c.s.opt.Redact(reason)}, nil
}

// approvalGate is check 4: a call that needs approval runs only on an
// approval a person gave for exactly that recorded call (run, step,
// attempt, index), its arguments and bind (the live definition and what
// serves it, see [bindDigest]). A new call is recorded waiting and a
// person is asked; existing is the waiting call on resume. An approval
// whose bind no longer holds is voided (approval.voided) and a person is
// asked again.
func (c *Caller) approvalGate(ctx context.Context, name string, d Decision, existing *store.Call, bind, why string, req *policy.Requirement) (driver.Result, error) {
	var (
		key     store.CallKey
		run     bool
		refused string
		asked   string
		voided  []store.Approval
	)
	const staleWhy = "the tool's live definition or what serves it changed since the approval was asked"
	err := c.tx(ctx, func(tx store.Tx) error {
		voided = nil
		if existing != nil {
			key = existing.CallKey
			a, ok, err := tx.ConsumeApprovalFor(key, bind, d.ArgsDigest)
			if err != nil {
				return err
			}
			if ok {
				if err := approvalRecorded(ctx, tx, a); err != nil {
					return err
				}
				run = true
				if err := tx.DecideCall(key, true, "", ""); err != nil {
					return err
				}
				ev := CallStarted{Index: key.Index, Attempt: c.attempt, ArgsDigest: d.ArgsDigest, Approval: a.ID}
				if d.tool != nil {
					// Said again, as the call's first record said it, so that
					// the record of the start reads true on its own.
					ev.DefDigest, ev.SideEffecting = d.tool.defDigest, d.tool.sideEff
				}
				return c.append(tx, name, ev)
			}
		}
		// No usable approval: a decided one (denied, expired) for this
		// call refuses; an open one for another bind is voided; an open
		// one for this bind goes on waiting; otherwise ask.
		decidedA, pending, stale, err := c.approvalState(tx, name, existing, bind, d.ArgsDigest)
		if err != nil {
			return err
		}
		if len(stale) > 0 {
			if voided, err = tx.VoidApprovals(key, staleWhy); err != nil {
				return err
			}
			for _, v := range voided {
				if err := c.append(tx, name, ApprovalVoided{Approval: v.ID, Attempt: c.attempt, Index: key.Index, Reason: staleWhy}); err != nil {
					return err
				}
			}
			pending, decidedA = nil, nil
		}
		if decidedA != nil {
			code := CodeDenied
			if decidedA.Status == store.ApprovalExpired {
				code = CodeExpired
				refused = fmt.Sprintf("the approval request for the call to %s in step %s expired before a person decided; it was not run", quote(name), quote(c.step))
			} else {
				refused = fmt.Sprintf("the call to %s in step %s was %s by a person", quote(name), quote(c.step), decidedA.Status)
				if decidedA.Reason != "" {
					refused += ": " + decidedA.Reason
				}
				refused += "; it was not run"
			}
			if existing != nil {
				if err := tx.DecideCall(existing.CallKey, false, string(code), c.s.opt.Redact(refused)); err != nil {
					return err
				}
				return c.append(tx, name, CallRefused{Index: existing.Index, Attempt: c.attempt, Code: code, Approval: decidedA.ID, Reason: refused})
			}
			_, err := c.start(tx, name, d, store.DecisionRefused, code, refused)
			return err
		}
		if existing != nil && pending != nil {
			asked = pending.ID
			return nil
		}
		if existing == nil {
			key, err = c.start(tx, name, d, store.DecisionWaiting, "", why)
			if err != nil {
				return err
			}
		}
		ap, err := tx.CreateApproval(store.Approval{
			Run: c.run, Step: c.step, Tool: name, DefDigest: bind, ArgsDigest: d.ArgsDigest,
			Call: &key, Reason: why, Expires: c.s.now().Add(c.s.opt.ApprovalExpiry),
		})
		if err != nil {
			return err
		}
		asked = ap.ID
		return c.append(tx, name, ApprovalRequested{Attempt: c.attempt, Approval: ap.ID, Index: key.Index, ArgsDigest: d.ArgsDigest,
			DefDigest: d.tool.defDigest, BindDigest: bind, Binding: d.tool.entry.Origin.Binding(), Reason: ap.Reason, Policy: req,
			AgentText: c.agentText(d.reasoning)})
	})
	if err == nil {
		c.s.sayVoided(voided, staleWhy)
	}
	switch {
	case err != nil:
		return driver.Result{}, err
	case run:
		return c.execute(ctx, &key, name, d)
	case refused != "":
		c.s.progress("  refused %s: %s", quote(name), refused)
		return driver.Result{Error: c.s.opt.Redact(refused)}, nil
	}
	if existing == nil {
		// The waiting call is remembered, unanswered: asked again through
		// this Caller (an external agent that keeps its step open), it
		// is this call, not a new one.
		c.memo = append(c.memo, store.Call{CallKey: key, Tool: name, ArgsDigest: d.ArgsDigest, DefDigest: d.tool.defDigest,
			Decision: store.DecisionWaiting, State: store.CallWaiting, SideEffecting: d.tool.sideEff, Reason: why})
		c.used = append(c.used, false)
	}
	c.s.progress("  waiting for approval %s of %s", asked, quote(name))
	return driver.Result{}, &driver.PendingError{Approval: asked}
}

// usable says why a recorded call must not run now ("" when it may): on
// resume its tool no longer passes checks 1 and 2 as it did (the name no
// longer resolves, nothing runs it, its live definition changed).
func (c *Caller) usable(ctx context.Context, d Decision) string {
	if !d.Allowed || d.tool == nil {
		return "the call no longer passes the decision path: " + d.Reason
	}
	if d.tool.entry.Tool == nil {
		return fmt.Sprintf("tool %s resolves to %s, but nothing connected runs it; the call was not run", quote(d.tool.def.Name), d.tool.entry.Origin)
	}
	reason, _ := c.confirm(ctx, d.tool)
	return reason
}

// failStarted records a started call that will not run (again) as failed.
func (c *Caller) failStarted(ctx context.Context, m *store.Call, reason string) (driver.Result, error) {
	reason = c.inStep(reason)
	err := c.tx(ctx, func(tx store.Tx) error {
		if err := tx.FinishCall(m.CallKey, store.CallFailed, nil, c.s.opt.Redact(reason)); err != nil {
			return err
		}
		return c.append(tx, m.Tool, CallFailed{Attempt: c.attempt, Index: m.Index, Reason: reason})
	})
	if err != nil {
		return driver.Result{}, err
	}
	c.s.progress("  failed %s: %s", quote(m.Tool), reason)
	return driver.Result{Error: c.s.opt.Redact(reason)}, nil
}

// refuseWaiting refuses a waiting call on resume: what it waits for an
// approval of no longer holds. Its open approvals are voided.
func (c *Caller) refuseWaiting(ctx context.Context, m *store.Call, code Code, reason string) (driver.Result, error) {
	reason = c.inStep(reason)
	var voided []store.Approval
	err := c.tx(ctx, func(tx store.Tx) error {
		var err error
		if voided, err = tx.VoidApprovals(m.CallKey, reason); err != nil {
			return err
		}
		for _, v := range voided {
			if err := c.append(tx, m.Tool, ApprovalVoided{Approval: v.ID, Attempt: c.attempt, Index: m.Index, Reason: reason}); err != nil {
				return err
			}
		}
		if err := tx.DecideCall(m.CallKey, false, string(code), c.s.opt.Redact(reason)); err != nil {
			return err
		}
		return c.append(tx, m.Tool, CallRefused{Index: m.Index, Attempt: c.attempt, Code: code, Reason: reason})
	})
	if err != nil {
		return driver.Result{}, err
	}
	c.s.sayVoided(voided, reason)
	c.s.progress("  refused %s: %s", quote(m.Tool), reason)
	return driver.Result{Error: c.s.opt.Redact(reason)}, nil
}

// approvalState finds, for the waiting call existing (or, for a new call,
// any call of this step with the same tool, bind and arguments), the
// latest decided (denied or expired) approval, a pending one, and the open
// (pending or approved) ones asked under another bind (stale), as the
// transaction tx sees them.
func (c *Caller) approvalState(tx store.Tx, tool string, existing *store.Call, bind, argsDigest string) (decided, pending *store.Approval, stale []store.Approval, err error) {
	all, err := tx.Approvals(c.run)
	if err != nil {
		return nil, nil, nil, err
	}
	for i := range all {
		a := &all[i]
		if a.Kind != store.KindCall || a.Step != c.step || a.Tool != tool || a.ArgsDigest != argsDigest {
			continue
		}
		if existing != nil && (a.Call == nil || *a.Call != existing.CallKey) {
			continue
		}
		if a.DefDigest != bind {
			if existing != nil && (a.Status == store.ApprovalPending || a.Status == store.ApprovalApproved) {
				stale = append(stale, *a)
			}
			continue
		}
		switch a.Status {
		case store.ApprovalDenied, store.ApprovalExpired:
			decided = a
		case store.ApprovalPending:
			pending = a
		}
	}
	if pending != nil && pending.Expires.Before(c.s.now()) && !pending.Expires.IsZero() {
		decided, pending = pending, nil
		decided.Status = store.ApprovalExpired
	}
	return decided, pending, stale, nil
}

func (s *Session) now() time.Time { return s.opt.Store.Now() }

// askPolicy asks the harness policy about the call d (no policy: the
// zero verdict).
func (c *Caller) askPolicy(ctx context.Context, d Decision) (policy.Verdict, error) {
	pol := c.s.opt.Policy
	if pol.Len() == 0 || d.tool == nil {
		return policy.Verdict{}, nil
	}
	return pol.Evaluate(policy.Call{Tool: d.tool.def.Name, RiskClass: d.tool.def.RiskClass, Step: c.step,
		Connector: connectorOf(d.tool.entry.Origin), Arguments: d.Args, Input: c.runInput(ctx)})
}

// connectorOf is what a policy rule's "connectors" names for a tool of
// origin o: the connector's provider or the MCP server's name, "builtin"
// for a built-in.
func connectorOf(o registry.Origin) string {
	if o.Kind == registry.Builtin {
		return "builtin"
	}
	return o.Name
}

// replay answers a call the attempt already made, on resume.
func (c *Caller) replay(ctx context.Context, m *store.Call, d Decision) (driver.Result, error) {
	switch m.State {
	case store.CallSucceeded:
		return driver.Result{Content: m.Result}, nil
	case store.CallFailed:
		return driver.Result{Error: m.Error}, nil
	case store.CallRefused:
		return driver.Result{Error: m.Reason}, nil
	case store.CallWaiting:
		if reason := c.usable(ctx, d); reason != "" {
			return c.refuseWaiting(ctx, m, CodeDrifted, reason)
		}
		_, live := c.confirm(ctx, d.tool)
		// Who decides a new request (one voided for a changed binding is
		// asked again) is what the policy says now.
		v, err := c.askPolicy(ctx, d)
		if err != nil {
			return c.refuseWaiting(ctx, m, CodePolicy, fmt.Sprintf("%v; a policy that fails to evaluate refuses: the call was refused and not run", err))
		}
		return c.approvalGate(ctx, m.Tool, d, m, bindDigest(d.tool, live, c.attempt), m.Reason, v.Require)
	case store.CallStarted:
		// Side-effecting if the row or the imported definition says so:
		// a row edited to say "read" does not make a side effect safe
		// to run again.
		if d.tool != nil && !c.inFlight(*m) {
			if reason := c.usable(ctx, d); reason != "" {
				return c.failStarted(ctx, m, reason)
			}
			why := "a read call interrupted before its outcome was recorded"
			if d.tool.sideEff {
				why = "a built-in call interrupted before its outcome, and with it its effect, was recorded"
			}
			err := c.tx(ctx, func(tx store.Tx) error {
				return c.append(tx, m.Tool, CallRetried{Attempt: c.attempt, Index: m.Index, Reason: why})
			})
			if err != nil {
				return driver.Result{}, err
			}
			return c.execute(ctx, &m.CallKey, m.Tool, d)
		}
		var ap store.Approval
		err := c.tx(ctx, func(tx store.Tx) error {
			var err error
			ap, err = tx.MarkOutcomeUnknown(m.CallKey, interruptedReason)
			if err != nil {
				return err
			}
			return c.append(tx, m.Tool, CallOutcomeUnknown{Attempt: c.attempt, Index: m.Index, Approval: ap.ID})
		})
		if err != nil {
			return driver.Result{}, err
		}
		// The store says outcome_unknown now; so does the record in
		// memory, which the same call asked again is answered from.
		m.State, m.Reason = store.CallOutcomeUnknown, interruptedReason
		c.s.progress("  outcome of %s unknown: waiting for a person (%s)", quote(m.Tool), ap.ID)
		return driver.Result{}, &driver.PendingError{Approval: ap.ID}
	case store.CallOutcomeUnknown:
		return c.outcomeUnknown(ctx, m, d)
	}
	return driver.Result{}, fmt.Errorf("call %d of step %s is in state %q, which the runtime cannot resume", m.Index, c.step, m.State)
}

// outcomeUnknown follows a person's decision on a call whose outcome is
// unknown: run it again (approved), leave it (denied), or keep waiting.
func (c *Caller) outcomeUnknown(ctx context.Context, m *store.Call, d Decision) (driver.Result, error) {
	if reason := c.usable(ctx, d); reason != "" {
		// Not run again on a definition no one reviewed; the decision
		// stays open for a later resume.
		c.s.progress("  not re-running %s: %s", quote(m.Tool), reason)
		return driver.Result{Error: c.s.opt.Redact(c.inStep(reason))}, nil
	}
	var rerun bool
	var denied string
	err := c.tx(ctx, func(tx store.Tx) error {
		a, ok, err := tx.ConsumeApprovalFor(m.CallKey, m.DefDigest, m.ArgsDigest)
		if err != nil {
			return err
		}
		if ok {
			if err := approvalRecorded(ctx, tx, a); err != nil {
				return err
			}
			rerun = true
			return c.append(tx, m.Tool, CallRerun{Attempt: c.attempt, Index: m.Index, Approval: a.ID})
		}
		all, err := tx.Approvals(c.run)
		if err != nil {
			return err
		}
		open := false
		for _, a := range all {
			if a.Kind != store.KindOutcomeUnknown || a.Call == nil || *a.Call != m.CallKey {
				continue
			}
			switch a.Status {
			case store.ApprovalDenied:
				denied = "the outcome of this call is unknown and a person decided not to run it again"
				if err := tx.FinishCall(m.CallKey, store.CallFailed, nil, denied); err != nil {
					return err
				}
				return c.append(tx, m.Tool, CallFailed{Attempt: c.attempt, Index: m.Index, Approval: a.ID, Reason: denied})
			case store.ApprovalPending, store.ApprovalApproved:
				open = true
			}
		}
		if open {
			return nil
		}
		// Every decision on it was used: a person had it run again and
		// the process stopped before that outcome was recorded. Its
		// outcome is unknown again, and a person decides again.
		ap, err := tx.CreateApproval(store.Approval{
			Kind: store.KindOutcomeUnknown, Run: c.run, Step: c.step, Tool: m.Tool, DefDigest: m.DefDigest, ArgsDigest: m.ArgsDigest,
			Call: &m.CallKey, Reason: "the process stopped after the call was run again and before its outcome was recorded",
		})
		if err != nil {
			return err
		}
		return c.append(tx, m.Tool, CallOutcomeUnknown{Attempt: c.attempt, Index: m.Index, Approval: ap.ID})
	})
	switch {
	case err != nil:
		return driver.Result{}, err
	case rerun:
		return c.execute(ctx, &m.CallKey, m.Tool, d)
	case denied != "":
		return driver.Result{Error: denied}, nil
	}
	return driver.Result{}, driver.ErrSuspended
}

// execute is checks 5 and 6: run the call with a timeout, validate the
// result against the outputSchema, and record the outcome.
//
// started is the started call, or nil for a read call not recorded yet:
// it is then recorded, in its final state, with its audit records, in one
// queued transaction. An outcome is queued ([store.Store.Queue]): it
// shares a commit with what the caller records next, and is durable
// before the next side-effecting call starts, a person is asked, or the
// step ends (see docs/store.md, "Pipelined call records"). A result with
// a Commit (a change to the store) is recorded with that change at once.
func (c *Caller) execute(ctx context.Context, started *store.CallKey, name string, d Decision) (driver.Result, error) {
	ti := d.tool
	key := store.CallKey{Run: c.run, Step: c.step, Attempt: c.attempt, Index: -1}
	if started != nil {
		key = *started
	}
	res, err := c.callTool(ctx, name, d, key.Index)
	if err != nil && started != nil && ti.sideEff && !registry.IsDefinite(err) {
		// Sent, and not answered in a way that says what happened: it
		// may have taken effect. Never retried automatically.
		return c.lost(ctx, *started, name, err)
	}
	failure := c.callFailure(name, err)
	var o outcome
	if res.Commit != nil && failure == "" {
		// The change and its record are one transaction.
		err = c.tx(ctx, func(tx store.Tx) error {
			o = c.commitOutcome(tx, name, ti, res, failure)
			return c.record(tx, started, key, name, d, o)
		})
		if err != nil {
			return driver.Result{}, err
		}
	} else {
		o = c.evaluate(name, ti, res.Content, failure)
		if started == nil {
			c.queueRead(ctx, readRecord{key: key, name: name, d: d, o: o})
		} else {
			c.queue(ctx, func(tx store.Tx) error { return c.record(tx, started, key, name, d, o) })
		}
	}
	if o.failure != "" {
		c.s.progress("  failed %s: %s", quote(name), o.failure)
		return driver.Result{Error: c.s.opt.Redact(o.failure)}, nil
	}
	c.s.progress("  allowed %s", quote(name))
	return driver.Result{Content: o.out}, nil
}

// maxNameBytes bounds a tool name as an agent sends it: names are at most
// 128 bytes (docs/format.md); a longer one is refused as too large, so a
// name is never a way to put a large text into the store.
const maxNameBytes = 1024

// shownName is the name a refused call is recorded under: the name as
// sent when it is at most the format's 128 bytes (docs/format.md), and
// otherwise only its size, "(a name of N bytes)". A name is never cut:
// a secret it holds would be shown in part, where the redactor, which
// matches whole values, cannot find it.
func shownName(name string) string {
	if len(name) <= 128 {
		return name
	}
	return fmt.Sprintf("(a name of %d bytes)", len(name))
}

// maxErrorBytes bounds the text of a tool's error that is recorded and
// shown to the agent: a tool's error is a message, not a result.
const maxErrorBytes = 8 << 10

// callTool runs the call to d's tool within the call timeout, its
// context carrying the call's [registry.CallInfo] (index: the call's,
// -1 when not recorded yet) and, with a tracer, the call's span. The
// tool executes without the Caller's lock (held on entry and on return):
// concurrent calls execute concurrently.
func (c *Caller) callTool(ctx context.Context, name string, d Decision, index int) (registry.Result, error) {
	cctx, cancel := context.WithTimeout(ctx, c.s.opt.CallTimeout)
	defer cancel()
	info := registry.CallInfo{Run: c.run, Step: c.step, Attempt: c.attempt, Index: index, Agent: c.agent, Redact: c.s.opt.Redact}
	cctx = registry.WithCallInfo(cctx, info)
	c.mu.Unlock()
	defer c.mu.Lock()
	if tr := c.s.opt.Tracer; tr != nil {
		cctx = traceCall(tr, cctx, info, recordTool(c.storedName(name)), d.ArgsDigest)
	}
	return d.tool.entry.Tool.Call(cctx, d.Args)
}

// callFailure is the recorded and shown text of a tool's error ("" for
// none): redacted and clipped to maxErrorBytes.
func (c *Caller) callFailure(name string, err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf("the call to %s failed: %s", quote(name), clipText(c.s.opt.Redact(err.Error()), maxErrorBytes))
}

// commitOutcome is a call's outcome in tx, the transaction that records
// it: with a Commit (and no failure), the change it makes, its result or
// its error; else the result the tool returned, or failure.
func (c *Caller) commitOutcome(tx store.Tx, name string, ti *toolInfo, res registry.Result, failure string) outcome {
	if res.Commit == nil || failure != "" {
		return c.evaluate(name, ti, res.Content, failure)
	}
	out, cerr := res.Commit(tx)
	f := ""
	if cerr != nil {
		f = fmt.Sprintf("the call to %s failed: %v", quote(name), cerr)
	}
	return c.evaluate(name, ti, out, f)
}

// executeInStore is checks 5 and 6 for a side-effecting call to a
// [registry.InStore] tool (a built-in): its Call, which changes nothing,
// runs first, within the call timeout; then one transaction records the
// call as started, makes its effect (the result's Commit) and records
// its outcome. After a crash all three happened or none did, so such a
// call is never outcome-unknown, and one commit is made where a call that
// leaves the process needs two (docs/runtime.md, "Built-ins' effects").
func (c *Caller) executeInStore(ctx context.Context, name string, d Decision) (driver.Result, error) {
	res, err := c.callTool(ctx, name, d, -1)
	failure := c.callFailure(name, err)
	var o outcome
	err = c.tx(ctx, func(tx store.Tx) error {
		key, err := c.start(tx, name, d, store.DecisionAllowed, "", "")
		if err != nil {
			return err
		}
		o = c.commitOutcome(tx, name, d.tool, res, failure)
		return c.record(tx, &key, key, name, d, o)
	})
	if err != nil {
		return driver.Result{}, err
	}
	if o.failure != "" {
		c.s.progress("  failed %s: %s", quote(name), o.failure)
		return driver.Result{Error: c.s.opt.Redact(o.failure)}, nil
	}
	c.s.progress("  allowed %s", quote(name))
	return driver.Result{Content: o.out}, nil
}

// agentText is a call's Reasoning as its approval request records it:
// invalid UTF-8 replaced with U+FFFD, trimmed, secret values redacted
// (before the clip, so no part of a secret is left at the cut; the
// record's data is redacted again as every record's is) and clipped to
// [MaxAgentTextBytes]; "" for none.
func (c *Caller) agentText(reasoning string) string {
	s := strings.TrimSpace(strings.ToValidUTF8(reasoning, "\uFFFD"))
	if s == "" {
		return ""
	}
	return clipText(strings.ToValidUTF8(c.s.opt.Redact(s), "\uFFFD"), MaxAgentTextBytes)
}

// clipText cuts s to at most n bytes (at a UTF-8 boundary), saying how
// much was left out.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d more bytes not shown)", s[:cut], len(s)-cut)
}

// outcome is a call's outcome as it is recorded: the result (redacted:
// what the store keeps and the agent sees) and its digest, or why it
// failed; invalid says the failure is a result against its outputSchema.
type outcome struct {
	out          jsontext.Value
	resultDigest string
	failure      string
	invalid      bool
}

// evaluate checks a result: its size, that it is JSON, its outputSchema.
func (c *Caller) evaluate(name string, ti *toolInfo, out jsontext.Value, failure string) outcome {
	if failure == "" && len(out) > c.s.opt.MaxResultBytes {
		failure = fmt.Sprintf("the result of %s is %d bytes, over the limit of %d; it was not stored or passed on", quote(name), len(out), c.s.opt.MaxResultBytes)
	}
	if failure == "" && !out.IsValid() {
		failure = fmt.Sprintf("the result of %s is not valid JSON; it was not passed on", quote(name))
	}
	if failure != "" {
		return outcome{failure: failure}
	}
	var o outcome
	if ti.output != nil {
		if verr := validateJSON(ti.output, out); verr != nil {
			o.resultDigest = digest(out)
			o.failure = fmt.Sprintf("the result of %s does not match its outputSchema: %s; it was not passed on", quote(name), schemaErr(verr))
			o.invalid = true
			return o
		}
	}
	o.out = c.redactJSON(out)
	o.resultDigest = digest(o.out) // the digest of what is kept (Reconcile compares it)
	return o
}

// record writes a call's outcome and its audit records in tx: for a read
// call not recorded yet (started nil), its row in its final state; else
// the started row's outcome.
func (c *Caller) record(tx store.Tx, started *store.CallKey, key store.CallKey, name string, d Decision, o outcome) error {
	if started == nil {
		return c.recordReads(tx, []readRecord{{key: key, name: name, d: d, o: o}})
	}
	state, res := store.CallSucceeded, o.out
	if o.failure != "" {
		state, res = store.CallFailed, nil
	}
	if err := tx.FinishCall(key, state, res, c.s.opt.Redact(o.failure)); err != nil {
		return err
	}
	evs := c.outcomeEvents(key.Index, nil, o)
	all := make([]audit.Record, len(evs))
	for i, ev := range evs {
		all[i] = newRecord(c.s.opt.Redact, c.run, c.step, name, ev)
	}
	_, err := tx.AppendAll(all...)
	return err
}

// readRecord is a read call that ran, waiting to be recorded.
type readRecord struct {
	key  store.CallKey
	name string
	d    Decision
	o    outcome
}

// recordReads records read calls of the attempt that ran, in order, each
// in its final state with its audit records (call.started, then its
// outcome), as record would one after another, in a few statements.
func (c *Caller) recordReads(tx store.Tx, rs []readRecord) error {
	calls := make([]store.Call, len(rs))
	for i, r := range rs {
		state := store.CallSucceeded
		if r.o.failure != "" {
			state = store.CallFailed
		}
		calls[i] = store.Call{
			CallKey: r.key, Tool: c.s.opt.Redact(r.name), DefDigest: r.d.tool.defDigest, Args: c.redactJSON(r.d.Args), ArgsDigest: r.d.ArgsDigest,
			Decision: store.DecisionAllowed, State: state, SideEffecting: r.d.tool.sideEff, Result: r.o.out, Error: c.s.opt.Redact(r.o.failure),
		}
	}
	got, err := tx.RecordCalls(calls)
	if err != nil {
		return err
	}
	all := make([]audit.Record, 0, 2*len(rs))
	for i, r := range rs {
		for _, ev := range c.outcomeEvents(got[i].Index, &readStart{&got[i], &r.d}, r.o) {
			all = append(all, newRecord(c.s.opt.Redact, c.run, c.step, r.name, ev))
		}
	}
	_, err = tx.AppendAll(all...)
	return err
}

// readStart is a read call recorded only once it ran: its row as
// recorded and its decision.
type readStart struct {
	row *store.Call
	d   *Decision
}

// outcomeEvents are the audit records of a call's outcome: with started
// (a read call recorded only now), its call.started first.
func (c *Caller) outcomeEvents(index int, started *readStart, o outcome) []Event {
	var evs []Event
	if started != nil {
		d, row := started.d, started.row
		evs = append(evs, CallStarted{Index: index, Attempt: c.attempt, ArgsDigest: d.ArgsDigest, StoredArgsDigest: storedArgsDigest(row.Args, d.ArgsDigest),
			DefDigest: d.tool.defDigest, SideEffecting: row.SideEffecting})
	}
	switch {
	case o.invalid:
		evs = append(evs, CallOutputInvalid{Attempt: c.attempt, Index: index, Reason: o.failure, ResultDigest: o.resultDigest},
			CallFailed{Attempt: c.attempt, Index: index, Reason: o.failure})
	case o.failure != "":
		evs = append(evs, CallFailed{Attempt: c.attempt, Index: index, Reason: o.failure})
	default:
		evs = append(evs, CallSucceeded{Attempt: c.attempt, Index: index, ResultDigest: o.resultDigest})
	}
	return evs
}

// lost records a side-effecting call that was sent and not answered as
// outcome-unknown, as after a crash, and suspends the step: a person
// decides whether it runs again. A call already outcome-unknown (a
// person's approved re-run of it) gets a new decision.
func (c *Caller) lost(ctx context.Context, key store.CallKey, name string, cause error) (driver.Result, error) {
	reason := fmt.Sprintf("the call was sent and no answer said what happened (%s)", clipText(c.s.opt.Redact(cause.Error()), maxErrorBytes))
	var ap store.Approval
	err := c.tx(ctx, func(tx store.Tx) error {
		m, err := tx.Call(key)
		if err != nil {
			return err
		}
		if m.State == store.CallOutcomeUnknown {
			// A person's approved re-run of a call whose outcome was
			// already unknown: it stays so, and a person decides again
			// (as when the process stopped during the re-run).
			ap, err = tx.CreateApproval(store.Approval{
				Kind: store.KindOutcomeUnknown, Run: c.run, Step: c.step, Tool: m.Tool, DefDigest: m.DefDigest, ArgsDigest: m.ArgsDigest,
				Call: &m.CallKey, Reason: "the call was run again and no answer said what happened",
			})
		} else {
			ap, err = tx.MarkOutcomeUnknown(key, reason)
		}
		if err != nil {
			return err
		}
		return c.append(tx, name, CallOutcomeUnknown{Attempt: c.attempt, Index: key.Index, Approval: ap.ID})
	})
	if err != nil {
		return driver.Result{}, err
	}
	c.s.progress("  outcome of %s unknown (%s): waiting for a person (%s)", quote(name), reason, ap.ID)
	return driver.Result{}, &driver.PendingError{Approval: ap.ID}
}

// redactJSON removes secret values from a JSON text, keeping it JSON.
//
// Escapes are normalised first (a server may write "sk_\/..." or
// "\u0073k_..."): strings are re-encoded with the fewest escapes, numbers
// and member order kept as they are, so a secret is found however it was
// spelled.
func (c *Caller) redactJSON(v jsontext.Value) jsontext.Value {
	if v == nil {
		return nil
	}
	if bytes.IndexByte(v, '\\') >= 0 {
		norm := jsontext.Value(bytes.Clone(v))
		if norm.Format() == nil {
			v = norm
		}
	}
	r := jsontext.Value(c.s.opt.Redact(string(v)))
	if !r.IsValid() {
		b, _ := json.Marshal("[redacted]")
		return b
	}
	return r
}

// confirm asks a live tool ([registry.Live]) for its definition now and
// returns why the call must be refused ("" when not): the provider cannot
// say, or the definition differs in any way from the one the run imported
// (every field counts, a description too: a changed description can
// change what a model does; the document was reviewed against the
// definition at import, not against this one). It also returns the live
// definition, of which an approval of the call is bound to the digest
// ([bindDigest]; computed only for a call that is asked about, as it is
// the digest of a canonical encoding).
func (c *Caller) confirm(ctx context.Context, ti *toolInfo) (reason string, live playbook.Definition) {
	live = ti.entry.Definition
	if lt, ok := ti.entry.Tool.(registry.Live); ok {
		now, err := lt.Current(ctx)
		if err != nil {
			return fmt.Sprintf("the definition of %s cannot be confirmed (%v); the call was refused and not run", quote(ti.def.Name), err), playbook.Definition{}
		}
		if fs := drift.Compare(ti.entry.Definition, now); len(fs) > 0 {
			return fmt.Sprintf("the definition of %s changed since the run was imported (%s); the call was refused and not run", quote(ti.def.Name), fs[0].Message), playbook.Definition{}
		}
		live = now
	}
	return "", live
}

// bindDigest is what an approval is bound to besides the run, step, call
// and arguments: the SHA-256 of the embedded definition's digest, the
// live (registry-side) definition's digest when the approval is asked,
// what serves the tool (registry.Origin.Binding: "mcp:acme",
// "connector:stripe", "builtin") and the step attempt. A change of any of
// them voids an approval and asks again.
func bindDigest(ti *toolInfo, live playbook.Definition, attempt int) string {
	return digest(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%d", ti.defDigest, definitionDigest(live), ti.entry.Origin.Binding(), attempt))
}

// validateJSON validates a JSON text against a compiled schema.
func validateJSON(s *jsonschema.Schema, v jsontext.Value) error {
	inst, err := decodeInstance(v)
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// inStep makes sure a refusal names the step: every refusal the agent
// gets names the step and the tool as received.
func (c *Caller) inStep(reason string) string {
	if strings.Contains(reason, "step "+quote(c.step)) {
		return reason
	}
	return "in step " + quote(c.step) + ": " + reason
}

// traceCall asks tr for the call's context; a tracer that panics leaves
// ctx as it is (tracing never stops a call, nor leaves the Caller's lock
// unheld for its deferred unlock).
func traceCall(tr CallTracer, ctx context.Context, info registry.CallInfo, tool, argsDigest string) (out context.Context) {
	out = ctx
	defer func() {
		if p := recover(); p != nil {
			out = ctx
		}
	}()
	return tr.TraceCall(ctx, info, tool, argsDigest)
}
