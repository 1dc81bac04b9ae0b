// Package runtime runs imported playbooks with the capability boundary
// held: every tool call of every driver goes through one decision path
// ([Engine] via [Imported.Decide]), in the order of the spec's "a call to
// any name not on the executing step's list is refused":
//
//  1. the exact name (byte for byte) is on the executing step's
//     allowedTools; otherwise it is refused: no handler runs and no
//     upstream request is sent;
//  2. the name resolves in the registry; an MCP tool whose live definition
//     drifted at error level since import is refused;
//  3. the arguments validate against the embedded inputSchema;
//  4. a tool with requiresApproval waits for a person's approval, bound to
//     run, step, tool, definition digest and arguments digest (RFC 8785),
//     which lets exactly that call run once;
//  5. the call executes with a timeout;
//  6. the result validates against the outputSchema; a mismatch is
//     recorded and returned to the agent as an error.
//
// Every outcome is written to the run's hash-chained audit log in the same
// transaction as the state it records. A check that itself fails (a store
// error) refuses the call and stops the run. Runs are durable: a run
// outlives the process, and [Engine.Resume] continues it from the last
// recorded point without running a side-effecting call twice.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/preflight"
	"github.com/openplaybook/openplaybook/store"
)

// Defaults of [Options].
const (
	DefaultMaxToolCalls   = 50
	DefaultApprovalExpiry = 24 * time.Hour
	DefaultCallTimeout    = 60 * time.Second
)

// Options configures an [Engine].
type Options struct {
	// Store is where runs, calls, approvals and the audit log live.
	Store *store.Store
	// Env gives the registry and the live connections (MCP sessions, the
	// Stripe connector) calls are dispatched to.
	Env *preflight.Env
	// Driver returns the driver bound to an agent name.
	Driver func(agent string) (driver.Driver, error)
	// Progress receives one line per event a person can follow; nil
	// discards them.
	Progress io.Writer
	// HarnessPath is recorded with a new run.
	HarnessPath string
	// MaxToolCalls bounds the tool calls of one agent step. Zero means
	// [DefaultMaxToolCalls].
	MaxToolCalls int
	// ApprovalExpiry is how long a tool-call approval request stays open.
	// Zero means [DefaultApprovalExpiry].
	ApprovalExpiry time.Duration
	// CallTimeout bounds one tool call's execution. Zero means
	// [DefaultCallTimeout].
	CallTimeout time.Duration
	// Redact removes secret values from text before it is written to the
	// store, the audit log or the progress output. Nil means Env's
	// secrets' Redact.
	Redact func(string) string
}

// Engine runs one imported document.
type Engine struct {
	im  *Imported
	opt Options

	epochMu sync.Mutex
	epochs  map[string]uint64 // MCP server list_changed epochs at import
}

// New returns an engine for im.
func New(im *Imported, opt Options) *Engine {
	if opt.MaxToolCalls <= 0 {
		opt.MaxToolCalls = DefaultMaxToolCalls
	}
	if opt.ApprovalExpiry <= 0 {
		opt.ApprovalExpiry = DefaultApprovalExpiry
	}
	if opt.CallTimeout <= 0 {
		opt.CallTimeout = DefaultCallTimeout
	}
	if opt.Progress == nil {
		opt.Progress = io.Discard
	}
	if opt.Redact == nil {
		if opt.Env != nil && opt.Env.Secrets != nil {
			opt.Redact = opt.Env.Secrets.Redact
		} else {
			opt.Redact = func(s string) string { return s }
		}
	}
	e := &Engine{im: im, opt: opt, epochs: map[string]uint64{}}
	if opt.Env != nil {
		for name, s := range opt.Env.Servers {
			e.epochs[name] = s.Epoch()
		}
	}
	return e
}

// Status is how a run stands when [Engine.Start] or [Engine.Resume]
// returns.
type Status string

// Run outcomes; the CLI maps them to exit codes 0, 3, 4 and 1.
const (
	Completed Status = "completed"
	Waiting   Status = "waiting"
	Rejected  Status = "rejected"
	Failed    Status = "failed"
)

// Outcome is the result of running a run as far as it goes.
type Outcome struct {
	Run    string `json:"run"`
	Status Status `json:"status"`
	// Reason says why the run failed, was rejected or waits.
	Reason string `json:"reason,omitempty"`
	// Waiting lists what a person must decide before the run goes on.
	Waiting []Pending `json:"waiting,omitempty"`
}

// Pending is one decision a run waits for.
type Pending struct {
	// Kind is "gate", "approval" or "outcome_unknown".
	Kind string `json:"kind"`
	// ID is what `openplaybook approve RUN ID` takes: the gate's step id
	// or the approval id.
	ID   string `json:"id"`
	Step string `json:"step"`
	Tool string `json:"tool,omitempty"`
	// Arguments are the arguments of the call to approve (canonical JSON,
	// secrets redacted), so a person sees exactly what runs.
	Arguments jsontext.Value `json:"arguments,omitempty"`
	// Summary says what is to be decided.
	Summary string `json:"summary"`
}

// Start validates input against the document's inputSchema, creates a
// run and executes it from the entry step until it completes, is
// rejected, fails or waits for a person. The run's id is in the outcome
// even when an error is returned after it was created.
func (e *Engine) Start(ctx context.Context, input jsontext.Value) (Outcome, error) {
	in, err := e.im.CheckInput(input)
	if err != nil {
		return Outcome{}, err
	}
	if r := jsontext.Value(e.opt.Redact(string(in))); r.IsValid() {
		in = r // a secret value in the input is never stored
	}
	doc := e.im.Doc
	var run store.Run
	err = e.opt.Store.Tx(ctx, func(tx *store.Tx) error {
		var err error
		run, err = tx.CreateRun(store.Run{
			PlaybookID: playbook.Str(doc.Manifest.ID), PlaybookVersion: playbook.Str(doc.Manifest.Version),
			Document: doc.Source, HarnessPath: e.opt.HarnessPath, Input: in,
		})
		if err != nil {
			return err
		}
		_, err = tx.Append(e.record(run.ID, "run.created", "", "", map[string]any{
			"playbook": run.PlaybookID, "version": run.PlaybookVersion, "documentDigest": run.DocumentDigest,
		}))
		return err
	})
	if err != nil {
		return Outcome{}, fmt.Errorf("creating the run: %w", err)
	}
	unlock, err := e.opt.Store.LockRun(run.ID)
	if err != nil {
		return Outcome{Run: run.ID}, err
	}
	defer unlock()
	e.progress("run %s started: %s %s", run.ID, run.PlaybookID, run.PlaybookVersion)
	out, err := e.loop(ctx, run.ID)
	out.Run = run.ID
	return out, err
}

// Resume continues a run from its last recorded point. Decisions made
// while no process ran it (approve, deny) take effect now. A started call
// without a recorded outcome is retried when it is a read call and marked
// outcome-unknown, waiting for a person, otherwise.
func (e *Engine) Resume(ctx context.Context, runID string) (Outcome, error) {
	// One process runs a run: a second resume while one is executing
	// fails here, before it can touch a call.
	unlock, err := e.opt.Store.LockRun(runID)
	if err != nil {
		return Outcome{Run: runID}, fmt.Errorf("run %s: %w", runID, err)
	}
	defer unlock()
	run, err := e.opt.Store.GetRun(ctx, runID)
	if err != nil {
		return Outcome{Run: runID}, err
	}
	if run.Status.Ended() {
		return Outcome{Run: runID, Status: Status(run.Status), Reason: run.Reason}, nil
	}
	if run.DocumentDigest != e.im.Digest {
		return Outcome{Run: runID}, fmt.Errorf("run %s was started with another version of the document (digest %s, this one %s); resume it with the document it was started with", runID, short(run.DocumentDigest), short(e.im.Digest))
	}
	if run.Status == store.RunWaiting {
		if err := e.opt.Store.Tx(ctx, func(tx *store.Tx) error {
			if err := tx.SetRunStatus(runID, store.RunRunning, ""); err != nil {
				return err
			}
			_, err := tx.Append(e.record(runID, "run.resumed", "", "", nil))
			return err
		}); err != nil {
			return Outcome{Run: runID}, err
		}
	}
	e.progress("run %s resumed at step %s", runID, run.CurrentStep)
	out, err := e.loop(ctx, runID)
	out.Run = runID
	return out, err
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// CheckInput validates a run's input against the document's inputSchema
// and returns it canonical; no input means {}.
func (im *Imported) CheckInput(input jsontext.Value) (jsontext.Value, error) {
	in := jsontext.Value(append([]byte(nil), input...))
	if len(strings.TrimSpace(string(in))) == 0 {
		in = jsontext.Value("{}")
	}
	if err := in.Canonicalize(); err != nil {
		return nil, &InputError{Syntax: true, Msg: fmt.Sprintf("the input is not valid JSON: %v", trimJSONErr(err))}
	}
	if im.input != nil {
		if err := validateJSON(im.input, in); err != nil {
			return nil, &InputError{Msg: fmt.Sprintf("the input does not match the document's inputSchema: %s", schemaErr(err))}
		}
	}
	return in, nil
}

// InputError is a run input that is not JSON (Syntax) or does not match
// the document's inputSchema.
type InputError struct {
	Syntax bool
	Msg    string
}

func (e *InputError) Error() string { return e.Msg }

// loop executes steps from the run's current point until the run ends or
// waits.
func (e *Engine) loop(ctx context.Context, runID string) (Outcome, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Outcome{Status: Failed, Reason: err.Error()}, err
		}
		run, err := e.opt.Store.GetRun(ctx, runID)
		if err != nil {
			return Outcome{}, err
		}
		if run.Status.Ended() {
			return Outcome{Status: Status(run.Status), Reason: run.Reason}, nil
		}
		stepID, attempt, status, err := e.current(ctx, run)
		if err != nil {
			return Outcome{}, err
		}
		si := e.im.steps[stepID]
		if si == nil {
			return e.fail(ctx, runID, fmt.Sprintf("step %q is not in the document", stepID))
		}
		var next string
		var out Outcome
		var done bool
		switch playbook.Str(si.step.Kind) {
		case playbook.KindAgent:
			next, out, done, err = e.agentStep(ctx, runID, si, attempt, status)
		case playbook.KindGate:
			next, out, done, err = e.gateStep(ctx, runID, si, attempt, status)
		default:
			return e.fail(ctx, runID, fmt.Sprintf("step %q has kind %q, which this runtime cannot run", stepID, playbook.Str(si.step.Kind)))
		}
		if err != nil || done {
			return out, err
		}
		if err := e.advance(ctx, runID, stepID, next); err != nil {
			return Outcome{}, err
		}
	}
}

// current returns the run's current step and its latest attempt, starting
// the entry step of a new run.
func (e *Engine) current(ctx context.Context, run store.Run) (step string, attempt int, status store.StepStatus, err error) {
	if run.CurrentStep == "" {
		entry := e.im.Doc.Steps[0]
		step = playbook.Str(entry.ID)
		err = e.opt.Store.Tx(ctx, func(tx *store.Tx) error {
			a, err := tx.StartStep(run.ID, step)
			if err != nil {
				return err
			}
			attempt = a
			_, err = tx.Append(e.record(run.ID, "step.started", step, "", map[string]any{"attempt": a}))
			return err
		})
		e.progress("step %s (%s)", step, stepLabel(entry))
		return step, attempt, store.StepRunning, err
	}
	steps, err := e.opt.Store.Steps(ctx, run.ID)
	if err != nil {
		return "", 0, "", err
	}
	for _, s := range steps {
		if s.Step == run.CurrentStep && s.Attempt >= attempt {
			attempt, status = s.Attempt, s.Status
		}
	}
	if attempt == 0 {
		return "", 0, "", fmt.Errorf("run %s: its current step %q has no recorded attempt", run.ID, run.CurrentStep)
	}
	return run.CurrentStep, attempt, status, nil
}

func stepLabel(s *playbook.Step) string {
	if playbook.Str(s.Kind) == playbook.KindGate {
		return "gate"
	}
	return "agent " + playbook.Str(s.Agent)
}

// advance moves the run from step to next, or completes it when next is
// "".
func (e *Engine) advance(ctx context.Context, runID, from, next string) error {
	if next == "" {
		err := e.opt.Store.Tx(ctx, func(tx *store.Tx) error {
			if err := tx.SetRunStatus(runID, store.RunCompleted, ""); err != nil {
				return err
			}
			_, err := tx.Append(e.record(runID, "run.completed", from, "", nil))
			return err
		})
		if err == nil {
			e.progress("run %s completed", runID)
		}
		return err
	}
	err := e.opt.Store.Tx(ctx, func(tx *store.Tx) error {
		a, err := tx.StartStep(runID, next)
		if err != nil {
			return err
		}
		_, err = tx.Append(e.record(runID, "step.started", next, "", map[string]any{"attempt": a, "from": from}))
		return err
	})
	if err == nil {
		e.progress("step %s (%s)", next, stepLabel(e.im.steps[next].step))
	}
	return err
}

// fail ends the run as failed.
func (e *Engine) fail(ctx context.Context, runID, reason string) (Outcome, error) {
	reason = e.opt.Redact(reason)
	err := e.opt.Store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.SetRunStatus(runID, store.RunFailed, reason); err != nil {
			return err
		}
		_, err := tx.Append(e.record(runID, "run.failed", "", "", map[string]any{"reason": reason}))
		return err
	})
	e.progress("run %s failed: %s", runID, reason)
	return Outcome{Status: Failed, Reason: reason}, err
}

// agentStep runs (or re-runs, on resume) one attempt of an agent step
// through its driver.
func (e *Engine) agentStep(ctx context.Context, runID string, si *stepInfo, attempt int, status store.StepStatus) (next string, out Outcome, done bool, err error) {
	stepID := playbook.Str(si.step.ID)
	switch status {
	case store.StepDone:
		return playbook.Str(si.step.Next), Outcome{}, false, nil
	case store.StepFailed:
		o, err := e.fail(ctx, runID, fmt.Sprintf("step %q failed", stepID))
		return "", o, true, err
	case store.StepWaiting:
		if err := e.opt.Store.Tx(ctx, func(tx *store.Tx) error {
			if err := tx.SetStepRunning(runID, stepID, attempt); err != nil {
				return err
			}
			_, err := tx.Append(e.record(runID, "step.resumed", stepID, "", map[string]any{"attempt": attempt}))
			return err
		}); err != nil {
			return "", Outcome{}, true, err
		}
	}
	drv, err := e.opt.Driver(playbook.Str(si.step.Agent))
	if err != nil {
		o, ferr := e.failStep(ctx, runID, stepID, attempt, fmt.Sprintf("agent %q: %v", playbook.Str(si.step.Agent), err))
		return "", o, true, ferr
	}
	in, err := e.stepInput(ctx, runID, si)
	if err != nil {
		return "", Outcome{}, true, err
	}
	c, err := e.newCaller(ctx, runID, stepID, attempt)
	if err != nil {
		return "", Outcome{}, true, err
	}
	output, err := drv.RunStep(ctx, in, c)
	switch {
	case errors.Is(err, driver.ErrSuspended):
		o, err := e.suspend(ctx, runID, stepID, attempt)
		return "", o, true, err
	case err != nil:
		o, ferr := e.failStep(ctx, runID, stepID, attempt, err.Error())
		return "", o, true, ferr
	}
	if c.storeErr != nil {
		o, ferr := e.failStep(ctx, runID, stepID, attempt, c.storeErr.Error())
		return "", o, true, errors.Join(c.storeErr, ferr)
	}
	output = jsontext.Value(e.opt.Redact(string(output)))
	if !output.IsValid() {
		// Not JSON (or not UTF-8): kept as a JSON string, invalid bytes
		// read as U+FFFD, so the output is never lost.
		output, _ = json.Marshal(string(output), jsontext.AllowInvalidUTF8(true))
	}
	err = e.opt.Store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.FinishStep(runID, stepID, attempt, store.StepDone, output, ""); err != nil {
			return err
		}
		_, err := tx.Append(e.record(runID, "step.finished", stepID, "", map[string]any{"attempt": attempt, "calls": c.count, "outputDigest": digest(output)}))
		return err
	})
	if err != nil {
		return "", Outcome{}, true, err
	}
	e.progress("step %s finished (%s)", stepID, plural(c.count, "tool call"))
	return playbook.Str(si.step.Next), Outcome{}, false, nil
}

func (e *Engine) failStep(ctx context.Context, runID, stepID string, attempt int, reason string) (Outcome, error) {
	reason = e.opt.Redact(reason)
	err := e.opt.Store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.FinishStep(runID, stepID, attempt, store.StepFailed, nil, reason); err != nil {
			return err
		}
		if err := tx.SetRunStatus(runID, store.RunFailed, fmt.Sprintf("step %s failed: %s", stepID, reason)); err != nil {
			return err
		}
		if _, err := tx.Append(e.record(runID, "step.failed", stepID, "", map[string]any{"attempt": attempt, "reason": reason})); err != nil {
			return err
		}
		_, err := tx.Append(e.record(runID, "run.failed", stepID, "", map[string]any{"reason": "step " + stepID + " failed"}))
		return err
	})
	e.progress("step %s failed: %s", stepID, reason)
	e.progress("run %s failed", runID)
	return Outcome{Status: Failed, Reason: fmt.Sprintf("step %s failed: %s", stepID, reason)}, err
}

// suspend records that a step waits for a person and returns what it
// waits for.
func (e *Engine) suspend(ctx context.Context, runID, stepID string, attempt int) (Outcome, error) {
	err := e.opt.Store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.SetStepWaiting(runID, stepID, attempt); err != nil {
			return err
		}
		if err := tx.SetRunStatus(runID, store.RunWaiting, "step "+stepID+" waits for a person's decision"); err != nil {
			return err
		}
		_, err := tx.Append(e.record(runID, "run.waiting", stepID, "", map[string]any{"attempt": attempt}))
		return err
	})
	if err != nil {
		return Outcome{}, err
	}
	return e.waitingOutcome(ctx, runID)
}

// waitingOutcome lists what a waiting run waits for.
func (e *Engine) waitingOutcome(ctx context.Context, runID string) (Outcome, error) {
	out := Outcome{Status: Waiting}
	pend, err := Pendings(ctx, e.opt.Store, runID)
	if err != nil {
		return out, err
	}
	out.Waiting = pend
	var parts []string
	for _, p := range pend {
		parts = append(parts, p.Summary)
		e.progress("waiting: %s (%s)", p.Summary, p.ID)
	}
	out.Reason = strings.Join(parts, "; ")
	return out, nil
}

// Pendings lists what a run waits for: open gates and pending approvals.
func Pendings(ctx context.Context, s *store.Store, runID string) ([]Pending, error) {
	var out []Pending
	gates, err := s.Gates(ctx, runID)
	if err != nil {
		return nil, err
	}
	for _, g := range gates {
		if g.Status == store.GateWaiting {
			out = append(out, Pending{Kind: "gate", ID: g.Step, Step: g.Step, Summary: fmt.Sprintf("gate %s waits for a person's decision", g.Step)})
		}
	}
	apr, err := s.PendingApprovals(ctx, runID)
	if err != nil {
		return nil, err
	}
	for _, a := range apr {
		p := Pending{Kind: string(a.Kind), ID: a.ID, Step: a.Step, Tool: a.Tool}
		if a.Call != nil {
			idx := a.Call.Index
			if calls, err := s.Calls(ctx, runID, store.CallFilter{Step: a.Call.Step, Attempt: a.Call.Attempt, Index: &idx}); err == nil && len(calls) == 1 {
				p.Arguments = calls[0].Args
			}
		}
		if a.Kind == store.KindOutcomeUnknown {
			p.Summary = fmt.Sprintf("the outcome of call %s in step %s is unknown: approve to run it again, deny to leave it", quote(a.Tool), a.Step)
		} else {
			p.Summary = fmt.Sprintf("call %s in step %s needs approval", quote(a.Tool), a.Step)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		if run, err := s.GetRun(ctx, runID); err == nil && run.Status == store.RunWaiting {
			out = append(out, Pending{Kind: "resume", ID: runID, Step: run.CurrentStep,
				Summary: "nothing is left to decide (an approval request expired or was decided): resume the run"})
		}
	}
	return out, nil
}

// gateStep opens a gate, or follows a person's decision on it. status is
// the attempt's: done when the decision was followed before (the process
// stopped before the next step started).
func (e *Engine) gateStep(ctx context.Context, runID string, si *stepInfo, attempt int, status store.StepStatus) (next string, out Outcome, done bool, err error) {
	stepID := playbook.Str(si.step.ID)
	gates, err := e.opt.Store.Gates(ctx, runID)
	if err != nil {
		return "", Outcome{}, true, err
	}
	var g *store.Gate
	for i := range gates {
		if gates[i].Step == stepID && gates[i].Attempt == attempt {
			g = &gates[i]
		}
	}
	if g == nil {
		err := e.opt.Store.Tx(ctx, func(tx *store.Tx) error {
			if _, err := tx.OpenGate(runID, stepID, attempt); err != nil {
				return err
			}
			if err := tx.SetStepWaiting(runID, stepID, attempt); err != nil {
				return err
			}
			if err := tx.SetRunStatus(runID, store.RunWaiting, "gate "+stepID+" waits for a person's decision"); err != nil {
				return err
			}
			_, err := tx.Append(e.record(runID, "gate.waiting", stepID, "", map[string]any{"attempt": attempt, "purpose": playbook.Str(si.step.Purpose)}))
			return err
		})
		if err != nil {
			return "", Outcome{}, true, err
		}
		o, err := e.waitingOutcome(ctx, runID)
		return "", o, true, err
	}
	switch g.Status {
	case store.GateWaiting:
		if err := e.opt.Store.Tx(ctx, func(tx *store.Tx) error {
			return tx.SetRunStatus(runID, store.RunWaiting, "gate "+stepID+" waits for a person's decision")
		}); err != nil {
			return "", Outcome{}, true, err
		}
		o, err := e.waitingOutcome(ctx, runID)
		return "", o, true, err
	case store.GateApproved:
		next = playbook.Str(si.step.Next)
	case store.GateRejected:
		next = playbook.Str(si.step.OnReject)
	}
	if status != store.StepDone {
		decision, _ := json.Marshal(map[string]any{"decision": string(g.Status), "reason": g.Reason, "by": g.DecidedBy})
		err = e.opt.Store.Tx(ctx, func(tx *store.Tx) error {
			return tx.FinishStep(runID, stepID, attempt, store.StepDone, decision, "")
		})
		if err != nil {
			return "", Outcome{}, true, err
		}
	}
	e.progress("gate %s %s", stepID, g.Status)
	if g.Status == store.GateRejected && next == "" {
		reason := fmt.Sprintf("gate %s rejected", stepID)
		if g.Reason != "" {
			reason += ": " + g.Reason
		}
		err := e.opt.Store.Tx(ctx, func(tx *store.Tx) error {
			if err := tx.SetRunStatus(runID, store.RunRejected, e.opt.Redact(reason)); err != nil {
				return err
			}
			_, err := tx.Append(e.record(runID, "run.rejected", stepID, "", map[string]any{"reason": e.opt.Redact(reason)}))
			return err
		})
		e.progress("run %s rejected at gate %s", runID, stepID)
		return "", Outcome{Status: Rejected, Reason: reason}, true, err
	}
	return next, Outcome{}, false, nil
}

// stepInput is what the driver sees: the step's purpose, the run input,
// earlier outputs and only the step's allowed tools.
func (e *Engine) stepInput(ctx context.Context, runID string, si *stepInfo) (driver.StepInput, error) {
	run, err := e.opt.Store.GetRun(ctx, runID)
	if err != nil {
		return driver.StepInput{}, err
	}
	steps, err := e.opt.Store.Steps(ctx, runID)
	if err != nil {
		return driver.StepInput{}, err
	}
	in := driver.StepInput{
		RunID: runID, StepID: playbook.Str(si.step.ID), Agent: playbook.Str(si.step.Agent), Purpose: playbook.Str(si.step.Purpose),
		Input: run.Input, MaxCalls: e.opt.MaxToolCalls,
	}
	for _, s := range steps {
		if s.Status == store.StepDone && len(s.Output) > 0 {
			in.Prior = append(in.Prior, driver.Prior{StepID: s.Step, Output: s.Output})
		}
	}
	for _, name := range si.names {
		ti := e.im.tools[name]
		if ti == nil || !ti.resolved {
			continue
		}
		in.Tools = append(in.Tools, driver.Tool{Name: name, Description: ti.def.Description, InputSchema: ti.def.InputSchema})
	}
	return in, nil
}

// record builds an audit record. The tool name goes in as received; a
// name that is not valid UTF-8 is recorded quoted (Go syntax, ASCII) with
// data.toolQuoted true, since the audit log is JSON, and a name holding a
// secret value is recorded redacted with data.toolRedacted true.
func (e *Engine) record(runID, kind, step, tool string, data map[string]any) audit.Record {
	if tool != "" && !utf8.ValidString(tool) {
		if data == nil {
			data = map[string]any{}
		}
		data["toolQuoted"] = true
		tool = quote(tool)
	}
	if red := e.opt.Redact(tool); red != tool {
		if data == nil {
			data = map[string]any{}
		}
		data["toolRedacted"] = true
		tool = red
	}
	r := audit.Record{Run: runID, Kind: kind, Step: step, Tool: tool}
	if len(data) > 0 {
		b, err := json.Marshal(data, json.Deterministic(true))
		if err == nil {
			r.Data = jsontext.Value(e.opt.Redact(string(b)))
			if !r.Data.IsValid() {
				r.Data = nil
			}
		}
	}
	return r
}

func (e *Engine) progress(format string, args ...any) {
	fmt.Fprintln(e.opt.Progress, e.opt.Redact(fmt.Sprintf(format, args...)))
}

// plural renders "1 tool call", "2 tool calls".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
