package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/drift"
	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/mcphost"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/store"
)

// caller is the decision path for one attempt at one agent step: the
// driver's [driver.Caller]. On resume it answers calls the attempt already
// made from the store (matched by exact tool name and arguments digest, in
// order), so nothing runs twice.
type caller struct {
	e       *Engine
	run     string
	step    string
	attempt int
	count   int // calls the driver made in this run of the step
	fresh   int // of them, calls not answered from memo

	memo []store.Call // the attempt's recorded calls
	used []bool

	// storeErr is set when a check failed because the store did: the
	// call was refused and the step must fail.
	storeErr error
}

func (e *Engine) newCaller(ctx context.Context, runID, stepID string, attempt int) (*caller, error) {
	memo, err := e.opt.Store.Calls(ctx, runID, store.CallFilter{Step: stepID, Attempt: attempt})
	if err != nil {
		return nil, err
	}
	return &caller{e: e, run: runID, step: stepID, attempt: attempt, memo: memo, used: make([]bool, len(memo))}, nil
}

// Call is the single decision path; see the package documentation.
func (c *caller) Call(ctx context.Context, call driver.Call) (driver.Result, error) {
	c.count++
	d := c.e.im.Decide(c.step, call.Name, call.Arguments)
	if m := c.match(call.Name, d.ArgsDigest); m != nil {
		return c.replay(ctx, m, d)
	}
	// The limit bounds the attempt's calls: those recorded before this
	// run of the step (an agent asked again on resume need not repeat
	// them) and the new ones.
	c.fresh++
	if len(c.memo)+c.fresh > c.e.opt.MaxToolCalls {
		err := c.tx(ctx, func(tx *store.Tx) error {
			_, err := tx.Append(c.e.record(c.run, "step.call-limit", c.step, call.Name, map[string]any{"limit": c.e.opt.MaxToolCalls}))
			return err
		})
		return driver.Result{}, errors.Join(fmt.Errorf("%w (%d calls)", driver.ErrCallLimit, c.e.opt.MaxToolCalls), err)
	}
	if !d.Allowed {
		return c.refuse(ctx, call.Name, d, d.Code, d.Reason)
	}
	if reason := c.e.drifted(ctx, d.tool); reason != "" {
		return c.refuse(ctx, call.Name, d, CodeDrifted, reason)
	}
	if d.tool.approval {
		return c.approvalGate(ctx, call.Name, d, nil)
	}
	if !d.tool.sideEff {
		// A read call is recorded with its outcome, in one durable commit
		// after it ran: if the process dies in between, nothing was
		// recorded and resume may run it again, which a read allows.
		return c.execute(ctx, nil, call.Name, d)
	}
	// A side-effecting call is recorded as started, durably, before it
	// runs, so a crash leaves a trace that makes resume ask a person
	// instead of running it again.
	var key store.CallKey
	err := c.tx(ctx, func(tx *store.Tx) error {
		k, err := c.start(tx, call.Name, d, store.DecisionAllowed, "")
		key = k
		return err
	})
	if err != nil {
		return driver.Result{}, err
	}
	return c.execute(ctx, &key, call.Name, d)
}

// tx runs fn in a store transaction; a failure is remembered so the step
// fails closed.
func (c *caller) tx(ctx context.Context, fn func(*store.Tx) error) error {
	err := c.e.opt.Store.Tx(ctx, fn)
	if err != nil {
		c.storeErr = fmt.Errorf("the runtime could not record a tool call, so it was refused: %w", err)
		return c.storeErr
	}
	return nil
}

// match returns the first recorded call of this attempt, not yet answered
// in this run of the step, with the same tool bytes and arguments digest.
func (c *caller) match(name, argsDigest string) *store.Call {
	for i := range c.memo {
		if !c.used[i] && c.memo[i].Tool == name && c.memo[i].ArgsDigest == argsDigest {
			c.used[i] = true
			return &c.memo[i]
		}
	}
	return nil
}

// start records a new call and its audit record.
func (c *caller) start(tx *store.Tx, name string, d Decision, decision store.Decision, reason string) (store.CallKey, error) {
	sc := store.Call{
		CallKey: store.CallKey{Run: c.run, Step: c.step, Attempt: c.attempt},
		// An agent may send a secret it was shown as a tool name: the
		// name is stored as received unless it holds one.
		Tool: c.e.opt.Redact(name), Args: c.redactJSON(d.Args), ArgsDigest: d.ArgsDigest,
		Decision: decision, Reason: c.e.opt.Redact(reason),
	}
	if d.tool != nil {
		sc.DefDigest = d.tool.defDigest
		sc.SideEffecting = d.tool.sideEff
	}
	got, err := tx.StartCall(sc)
	if err != nil {
		return store.CallKey{}, err
	}
	kind := map[store.Decision]string{store.DecisionAllowed: "call.started", store.DecisionRefused: "call.refused", store.DecisionWaiting: "call.waiting"}[decision]
	data := map[string]any{"index": got.Index, "attempt": c.attempt, "argsDigest": d.ArgsDigest}
	if reason != "" {
		data["reason"] = reason
	}
	if d.tool != nil {
		data["defDigest"] = d.tool.defDigest
	}
	_, err = tx.Append(c.e.record(c.run, kind, c.step, name, data))
	return got.CallKey, err
}

// refuse records a refused call; the agent gets the reason and may go on.
func (c *caller) refuse(ctx context.Context, name string, d Decision, code, reason string) (driver.Result, error) {
	reason = c.inStep(reason)
	err := c.tx(ctx, func(tx *store.Tx) error {
		_, err := c.start(tx, name, d, store.DecisionRefused, code+": "+reason)
		return err
	})
	if err != nil {
		return driver.Result{}, err
	}
	c.e.progress("  refused %s: %s", quote(name), reason)
	return driver.Result{Error: reason}, nil
}

// approvalGate is check 4: consume an approval for exactly this call, or
// ask for one and suspend the step. existing is the recorded waiting call
// on resume, nil for a new call.
func (c *caller) approvalGate(ctx context.Context, name string, d Decision, existing *store.Call) (driver.Result, error) {
	var (
		key     store.CallKey
		run     bool
		refused string
		asked   string
	)
	err := c.tx(ctx, func(tx *store.Tx) error {
		a, ok, err := tx.ConsumeApproval(c.run, c.step, name, d.tool.defDigest, d.ArgsDigest)
		if err != nil {
			return err
		}
		if ok {
			run = true
			if existing != nil {
				key = existing.CallKey
				if err := tx.DecideCall(key, true, ""); err != nil {
					return err
				}
				_, err = tx.Append(c.e.record(c.run, "call.started", c.step, name, map[string]any{"index": key.Index, "attempt": c.attempt, "approval": a.ID, "argsDigest": d.ArgsDigest}))
				return err
			}
			key, err = c.start(tx, name, d, store.DecisionAllowed, "approved: "+a.ID)
			return err
		}
		// No usable approval: a decided one for these exact digests
		// refuses; otherwise ask.
		decided, pending, err := c.e.approvalState(ctx, c.run, c.step, name, d.tool.defDigest, d.ArgsDigest)
		if err != nil {
			return err
		}
		if decided != nil {
			if decided.Status == store.ApprovalExpired {
				refused = fmt.Sprintf("the approval request for the call to %s in step %s expired before a person decided; it was not run", quote(name), quote(c.step))
			} else {
				refused = fmt.Sprintf("the call to %s in step %s was %s by a person", quote(name), quote(c.step), decided.Status)
				if decided.Reason != "" {
					refused += ": " + decided.Reason
				}
				refused += "; it was not run"
			}
			if existing != nil {
				// The stored reason starts with the refusal code, as
				// every refusal's does: replay strips it.
				if err := tx.DecideCall(existing.CallKey, false, c.e.opt.Redact(string(decided.Status)+": "+refused)); err != nil {
					return err
				}
				_, err := tx.Append(c.e.record(c.run, "call.refused", c.step, name, map[string]any{"index": existing.Index, "approval": decided.ID, "reason": refused}))
				return err
			}
			_, err := c.start(tx, name, d, store.DecisionRefused, string(decided.Status)+": "+refused)
			return err
		}
		if existing != nil && pending != nil {
			asked = pending.ID
			return nil
		}
		if existing == nil {
			key, err = c.start(tx, name, d, store.DecisionWaiting, "requiresApproval")
			if err != nil {
				return err
			}
		} else {
			key = existing.CallKey
		}
		ap, err := tx.CreateApproval(store.Approval{
			Run: c.run, Step: c.step, Tool: name, DefDigest: d.tool.defDigest, ArgsDigest: d.ArgsDigest,
			Call: &key, Reason: "requiresApproval", Expires: c.e.now().Add(c.e.opt.ApprovalExpiry),
		})
		if err != nil {
			return err
		}
		asked = ap.ID
		_, err = tx.Append(c.e.record(c.run, "approval.requested", c.step, name, map[string]any{"approval": ap.ID, "index": key.Index, "argsDigest": d.ArgsDigest, "defDigest": d.tool.defDigest}))
		return err
	})
	switch {
	case err != nil:
		return driver.Result{}, err
	case run:
		return c.execute(ctx, &key, name, d)
	case refused != "":
		c.e.progress("  refused %s: %s", quote(name), refused)
		return driver.Result{Error: refused}, nil
	}
	c.e.progress("  waiting for approval %s of %s", asked, quote(name))
	return driver.Result{}, driver.ErrSuspended
}

// approvalState finds the latest decided (denied or expired) approval and
// any pending one for exactly this call.
func (e *Engine) approvalState(ctx context.Context, run, step, tool, defDigest, argsDigest string) (decided, pending *store.Approval, err error) {
	all, err := e.opt.Store.Approvals(ctx, run)
	if err != nil {
		return nil, nil, err
	}
	for i := range all {
		a := &all[i]
		if a.Kind != store.KindCall || a.Step != step || a.Tool != tool || a.DefDigest != defDigest || a.ArgsDigest != argsDigest {
			continue
		}
		switch a.Status {
		case store.ApprovalDenied, store.ApprovalExpired:
			decided = a
		case store.ApprovalPending:
			pending = a
		}
	}
	if pending != nil && pending.Expires.Before(e.now()) && !pending.Expires.IsZero() {
		decided, pending = pending, nil
		decided.Status = store.ApprovalExpired
	}
	return decided, pending, nil
}

func (e *Engine) now() time.Time { return e.opt.Store.Now() }

// replay answers a call the attempt already made, on resume.
func (c *caller) replay(ctx context.Context, m *store.Call, d Decision) (driver.Result, error) {
	switch m.State {
	case store.CallSucceeded:
		return driver.Result{Content: m.Result}, nil
	case store.CallFailed:
		return driver.Result{Error: m.Error}, nil
	case store.CallRefused:
		reason := m.Reason
		if _, r, ok := strings.Cut(reason, ": "); ok {
			reason = r
		}
		return driver.Result{Error: reason}, nil
	case store.CallWaiting:
		return c.approvalGate(ctx, m.Tool, d, m)
	case store.CallStarted:
		if !m.SideEffecting {
			err := c.tx(ctx, func(tx *store.Tx) error {
				_, err := tx.Append(c.e.record(c.run, "call.retried", c.step, m.Tool, map[string]any{"index": m.Index, "reason": "a read call interrupted before its outcome was recorded"}))
				return err
			})
			if err != nil {
				return driver.Result{}, err
			}
			return c.execute(ctx, &m.CallKey, m.Tool, d)
		}
		var ap store.Approval
		err := c.tx(ctx, func(tx *store.Tx) error {
			var err error
			ap, err = tx.MarkOutcomeUnknown(m.CallKey, "the process stopped after the call started and before its outcome was recorded")
			if err != nil {
				return err
			}
			_, err = tx.Append(c.e.record(c.run, "call.outcome-unknown", c.step, m.Tool, map[string]any{"index": m.Index, "approval": ap.ID}))
			return err
		})
		if err != nil {
			return driver.Result{}, err
		}
		c.e.progress("  outcome of %s unknown: waiting for a person (%s)", quote(m.Tool), ap.ID)
		return driver.Result{}, driver.ErrSuspended
	case store.CallOutcomeUnknown:
		var rerun bool
		var denied string
		err := c.tx(ctx, func(tx *store.Tx) error {
			a, ok, err := tx.ConsumeApproval(c.run, c.step, m.Tool, m.DefDigest, m.ArgsDigest)
			if err != nil {
				return err
			}
			if ok {
				rerun = true
				_, err = tx.Append(c.e.record(c.run, "call.rerun", c.step, m.Tool, map[string]any{"index": m.Index, "approval": a.ID}))
				return err
			}
			all, err := c.e.opt.Store.Approvals(ctx, c.run)
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
					_, err := tx.Append(c.e.record(c.run, "call.failed", c.step, m.Tool, map[string]any{"index": m.Index, "approval": a.ID, "reason": denied}))
					return err
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
			_, err = tx.Append(c.e.record(c.run, "call.outcome-unknown", c.step, m.Tool, map[string]any{"index": m.Index, "approval": ap.ID}))
			return err
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
	return driver.Result{}, fmt.Errorf("call %d of step %s is in state %q, which the runtime cannot resume", m.Index, c.step, m.State)
}

// execute is checks 5 and 6: run the call with a timeout, validate the
// result against the outputSchema, and record the outcome.
//
// key is the started call, or nil for a read call not recorded yet: it is
// then recorded as started in the same transaction as its outcome.
func (c *caller) execute(ctx context.Context, started *store.CallKey, name string, d Decision) (driver.Result, error) {
	ti := d.tool
	cctx, cancel := context.WithTimeout(ctx, c.e.opt.CallTimeout)
	defer cancel()
	key := store.CallKey{Run: c.run, Step: c.step, Attempt: c.attempt, Index: -1}
	if started != nil {
		key = *started
	}
	result, write, err := c.e.dispatch(cctx, key, ti, d.Args)
	var out jsontext.Value
	var failure string
	if err != nil {
		failure = fmt.Sprintf("the call to %s failed: %v", quote(name), err)
	}
	finish := func(tx *store.Tx) error {
		if started == nil {
			k, err := c.start(tx, name, d, store.DecisionAllowed, "")
			if err != nil {
				return err
			}
			key = k
		}
		if failure == "" && write != nil {
			r, err := write(tx)
			if err != nil {
				failure = fmt.Sprintf("the call to %s failed: %v", quote(name), err)
			} else {
				result = r
			}
		}
		if failure == "" {
			out, err = json.Marshal(result, json.Deterministic(true))
			if err != nil {
				failure = fmt.Sprintf("the result of %s cannot be encoded: %v", quote(name), err)
			}
		}
		if failure == "" && ti.output != nil {
			if verr := validateJSON(ti.output, out); verr != nil {
				failure = fmt.Sprintf("the result of %s does not match its outputSchema: %s; it was not passed on", quote(name), schemaErr(verr))
				if _, err := tx.Append(c.e.record(c.run, "call.output-invalid", c.step, name, map[string]any{"index": key.Index, "reason": failure, "resultDigest": digest(out)})); err != nil {
					return err
				}
				out = nil
			}
		}
		if failure != "" {
			if err := tx.FinishCall(key, store.CallFailed, nil, c.e.opt.Redact(failure)); err != nil {
				return err
			}
			_, err := tx.Append(c.e.record(c.run, "call.failed", c.step, name, map[string]any{"index": key.Index, "reason": failure}))
			return err
		}
		red := c.redactJSON(out)
		if err := tx.FinishCall(key, store.CallSucceeded, red, ""); err != nil {
			return err
		}
		_, err := tx.Append(c.e.record(c.run, "call.succeeded", c.step, name, map[string]any{"index": key.Index, "resultDigest": digest(out)}))
		return err
	}
	if err := c.tx(ctx, finish); err != nil {
		return driver.Result{}, err
	}
	if failure != "" {
		c.e.progress("  failed %s: %s", quote(name), failure)
		return driver.Result{Error: c.e.opt.Redact(failure)}, nil
	}
	c.e.progress("  allowed %s", quote(name))
	return driver.Result{Content: out}, nil
}

// redactJSON removes secret values from a JSON text, keeping it JSON.
func (c *caller) redactJSON(v jsontext.Value) jsontext.Value {
	if v == nil {
		return nil
	}
	r := jsontext.Value(c.e.opt.Redact(string(v)))
	if !r.IsValid() {
		b, _ := json.Marshal("[redacted]")
		return b
	}
	return r
}

// drifted re-lists an MCP tool's server when the server announced a
// changed tool list since import, or never announces changes (it did not
// declare tools.listChanged), and returns why the call must be refused
// when the live definition drifted at error level ("" when not).
func (e *Engine) drifted(ctx context.Context, ti *toolInfo) string {
	server, _, ok := playbook.MCPParts(ti.def.Name)
	if !ok || e.opt.Env == nil {
		return ""
	}
	s := e.opt.Env.Servers[server]
	if s == nil {
		return fmt.Sprintf("MCP server %q is not connected", server)
	}
	e.epochMu.Lock()
	same := s.Epoch() == e.epochs[server]
	e.epochMu.Unlock()
	if same && announcesChanges(s) {
		return ""
	}
	tools, err := s.Tools(ctx)
	if err != nil {
		return fmt.Sprintf("MCP server %q changed its tools and could not be asked again: %v", server, err)
	}
	for _, t := range tools {
		if t.Name != ti.def.Name {
			continue
		}
		for _, f := range drift.Compare(ti.def, t.Definition) {
			if f.Severity == diag.Error {
				return fmt.Sprintf("the definition of %s changed since the run was imported (%s); the call was refused and not run", quote(ti.def.Name), f.Message)
			}
		}
		return ""
	}
	return fmt.Sprintf("MCP server %q no longer lists %s; the call was refused and not run", server, quote(ti.def.Name))
}

// announcesChanges reports whether a server declared tools.listChanged:
// only then does an unchanged epoch mean unchanged tools. A server that
// did not is listed again before each call (mcphost's Tools does).
func announcesChanges(s *mcphost.Server) bool {
	r := s.InitializeResult()
	return r != nil && r.Capabilities != nil && r.Capabilities.Tools != nil && r.Capabilities.Tools.ListChanged
}

// validateJSON validates a JSON text against a compiled schema.
func validateJSON(s *jsonschema.Schema, v jsontext.Value) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(v))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// inStep makes sure a refusal names the step: every refusal the agent
// gets names the step and the tool as received.
func (c *caller) inStep(reason string) string {
	if strings.Contains(reason, "step "+quote(c.step)) {
		return reason
	}
	return "in step " + quote(c.step) + ": " + reason
}
