// Package runtime runs imported playbooks with the capability boundary
// held: every tool call of every driver, and of anything else that holds
// a [Caller] (a gateway, a console, a test), goes through one decision
// path, in the order of the spec's "a call to any name not on the
// executing step's list is refused":
//
//  1. the exact name (byte for byte) is on the executing step's
//     allowedTools; otherwise it is refused: no tool runs and no upstream
//     request is sent;
//  2. the name resolves in the registry to an entry with a tool; a tool
//     whose live definition ([registry.Live]) drifted at error level since
//     import is refused;
//  3. the arguments validate against the embedded inputSchema;
//  4. a tool with requiresApproval waits for a person's approval, bound to
//     run, step, tool, definition digest and arguments digest (RFC 8785),
//     which lets exactly that call run once;
//  5. the call executes with a timeout;
//  6. the result validates against the outputSchema; a mismatch is
//     recorded and returned to the agent as an error.
//
// Every outcome is written to the run's hash-chained audit log (typed
// events, see [Event]) in the same transaction as the state it records. A
// check that itself fails (a store error) refuses the call and stops the
// run. Runs are durable: a run outlives the process, and [Session.Resume]
// continues it from the last recorded point without running a
// side-effecting call twice. People decide gates and approvals with
// [Decide].
//
// The runtime knows no provider: what executes a call is the
// [registry.Tool] of the call's registry entry (package host builds the
// registry from a harness).
package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/policy"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/validate"
)

// Defaults of [SessionOptions].
const (
	DefaultMaxToolCalls   = 50
	DefaultApprovalExpiry = 24 * time.Hour
	DefaultCallTimeout    = 60 * time.Second
	// DefaultMaxArgumentBytes bounds what one call may send: the bytes of
	// its tool name and arguments as the agent sent them (1 MiB).
	DefaultMaxArgumentBytes = 1 << 20
	// DefaultMaxResultBytes bounds one call's result as a tool returns
	// it (4 MiB).
	DefaultMaxResultBytes = 4 << 20
)

// SessionOptions configures [Open].
type SessionOptions struct {
	// Document is the playbook to run, as playbook.Read returned it.
	// Required.
	Document *playbook.Document
	// Registry is what the runtime can call: the registry every
	// allowedTools name resolves in, with the tools that execute calls.
	// Required.
	Registry *registry.Registry
	// Store is where runs, calls, approvals and the audit log live.
	// Required.
	Store store.Store
	// Driver returns the driver bound to an agent name. Required to run
	// agent steps; nil refuses them (the step fails).
	Driver func(agent string) (driver.Driver, error)
	// Check returns the diagnostics of checking the document against what
	// serves the registry (preflight: connections, MCP servers, secrets,
	// drift), as package preflight does. Nil means no check beyond
	// validation against the registry.
	Check func(ctx context.Context, doc *playbook.Document) []diag.Diagnostic
	// Progress receives one line per event a person can follow; nil
	// discards them.
	Progress io.Writer
	// HarnessPath is recorded with a new run.
	HarnessPath string
	// HarnessDigest identifies the harness (the SHA-256 of its file, hex):
	// it is recorded in a new run's run.created record, and a resume
	// with another refuses unless AcceptHarnessChange is set, which is
	// audited (run.harness-changed). "" records nothing and checks
	// nothing.
	HarnessDigest string
	// AcceptHarnessChange lets Resume and Retry go on with a harness other
	// than the one the run was last run with ([CheckHarness]).
	AcceptHarnessChange bool
	// MaxToolCalls bounds the tool calls of one agent step. Zero means
	// [DefaultMaxToolCalls].
	MaxToolCalls int
	// ApprovalExpiry is how long a tool-call approval request stays open.
	// Zero means [DefaultApprovalExpiry].
	ApprovalExpiry time.Duration
	// CallTimeout bounds one tool call's execution. Zero means
	// [DefaultCallTimeout].
	CallTimeout time.Duration
	// MaxArgumentBytes bounds a call's tool name and arguments, in bytes:
	// a larger call is refused with [CodeTooLarge] before anything else
	// reads it, and is recorded by digest and size, not whole. Zero means
	// [DefaultMaxArgumentBytes].
	MaxArgumentBytes int
	// MaxResultBytes bounds a call's result, in bytes: a larger result is
	// not stored and not passed on; the call fails with a notice saying
	// how large it was. Zero means [DefaultMaxResultBytes].
	MaxResultBytes int
	// Redact removes secret values from text before it is written to the
	// store, the audit log or the progress output, and before a tool may
	// store it. Nil means no redaction.
	Redact func(string) string
	// Policy, when set, is asked about every call the document lets run
	// (after checks 1 to 3 and the live definition check): a rule may
	// refuse it ([CodePolicy]) or require a person's approval, never
	// loosen what the document says. A rule that fails to evaluate
	// refuses the call. Nil: the document alone decides.
	Policy *policy.Policy
	// Tracer, when set, gives each tool call's execution the trace
	// context of its span ([CallTracer]), which MCP servers and
	// connectors receive as a W3C traceparent. Nil means the Store's
	// (or that of a store it wraps, [store.As]) when it is a CallTracer,
	// as obs's store wrapper is; else none.
	Tracer CallTracer
}

// CallTracer gives a tool call the trace context it executes under.
//
// TraceCall is called once per call that executes (after the decision,
// after a side-effecting call's call.started record has committed,
// before the tool runs), without the Caller's lock. call names the call:
// its run, step, attempt and index (-1 for a read call, which is
// recorded, and given its index, only once it ran); tool is its name as
// the audit records store it (secret values redacted) and argsDigest the
// digest of its arguments, as the call.started record carries them. It
// returns the context the tool runs under: ctx carrying the span of the
// call (go.opentelemetry.io/otel/trace.ContextWithSpanContext), or ctx
// itself. It must not fail the call and must return promptly.
type CallTracer interface {
	TraceCall(ctx context.Context, call registry.CallInfo, tool, argsDigest string) context.Context
}

// ErrNotRunnable is returned by [Open] when the document has an
// error-level diagnostic: nothing was imported and nothing can run.
var ErrNotRunnable = errors.New("the document does not pass validation and check; nothing was run")

// Session is one document imported for running against a registry and
// a store: it starts and resumes runs of it, and hands out the [Caller]
// of a step's attempt. It is safe for concurrent use by runs of the same
// document; one run is executed by one process at a time (a run lock in
// the store enforces it).
type Session struct {
	im  *Imported
	opt SessionOptions
	// drift are the warning-level drift findings of the check Open ran
	// (recorded as run.drift).
	drift []DriftWarning
}

// Open does what a run does before anything executes: it validates the
// document against the registry (package validate), adds opt.Check's
// diagnostics, and, when none is an error, imports it ([Import]). It
// returns every diagnostic found, sorted; with an error among them, a nil
// Session and [ErrNotRunnable]. Any other error is an option that is
// missing or a document that cannot be imported (a schema that does not
// compile, names that collide on a model's wire).
func Open(ctx context.Context, opt SessionOptions) (*Session, []diag.Diagnostic, error) {
	if opt.Document == nil || opt.Registry == nil || opt.Store == nil {
		return nil, nil, errors.New("runtime: Open needs a Document, a Registry and a Store")
	}
	doc := opt.Document
	ds := validate.Document(doc, &validate.Options{Registry: opt.Registry.Has})
	var checked []diag.Diagnostic
	if opt.Check != nil {
		checked = opt.Check(ctx, doc)
		ds = append(ds, checked...)
	}
	diag.Sort(ds)
	if diag.Count(ds, diag.Error) > 0 {
		return nil, ds, ErrNotRunnable
	}
	im, err := Import(doc, opt.Registry)
	if err != nil {
		return nil, ds, fmt.Errorf("importing %s: %w", doc.File, err)
	}
	sess := newSession(im, opt)
	sess.drift = driftWarnings(doc, checked)
	return sess, ds, nil
}

func newSession(im *Imported, opt SessionOptions) *Session {
	if opt.MaxToolCalls <= 0 {
		opt.MaxToolCalls = DefaultMaxToolCalls
	}
	if opt.ApprovalExpiry <= 0 {
		opt.ApprovalExpiry = DefaultApprovalExpiry
	}
	if opt.CallTimeout <= 0 {
		opt.CallTimeout = DefaultCallTimeout
	}
	if opt.MaxArgumentBytes <= 0 {
		opt.MaxArgumentBytes = DefaultMaxArgumentBytes
	}
	if opt.MaxResultBytes <= 0 {
		opt.MaxResultBytes = DefaultMaxResultBytes
	}
	if opt.Progress == nil {
		opt.Progress = io.Discard
	}
	if opt.Redact == nil {
		opt.Redact = func(s string) string { return s }
	}
	if opt.Tracer == nil {
		opt.Tracer, _ = store.As[CallTracer](opt.Store)
	}
	if opt.Driver == nil {
		opt.Driver = func(agent string) (driver.Driver, error) {
			return nil, fmt.Errorf("no driver is bound to agent %q", agent)
		}
	}
	return &Session{im: im, opt: opt}
}

// Imported returns the imported document.
func (s *Session) Imported() *Imported { return s.im }

// Store returns the session's store.
func (s *Session) Store() store.Store { return s.opt.Store }

// Status is how a run stands when [Session.Start] or [Session.Resume]
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
	// Retry is set when the run just failed at a step whose failure was
	// transient: [Session.Retry] may start a new attempt of it.
	Retry bool `json:"retry,omitempty"`
}

// Start validates input against the document's inputSchema, creates a
// run and executes it from the entry step until it completes, is
// rejected, fails or waits for a person. The run's id is in the outcome
// even when an error is returned after it was created. An input that is
// not JSON or does not match is an [*InputError], before any run exists.
func (s *Session) Start(ctx context.Context, input jsontext.Value) (Outcome, error) {
	runID, err := s.Create(ctx, input)
	if err != nil {
		return Outcome{}, err
	}
	unlock, err := s.opt.Store.LockRun(runID)
	if err != nil {
		return Outcome{Run: runID}, err
	}
	defer unlock()
	out, err := s.loop(ctx, runID)
	out.Run = runID
	return out, err
}

// Create validates input against the document's inputSchema and creates
// a run at its entry step, without executing anything: [Session.Resume]
// executes it. A server uses it to answer with the run's id at once. An
// input that is not JSON or does not match is an [*InputError].
func (s *Session) Create(ctx context.Context, input jsontext.Value) (string, error) {
	in, err := s.im.CheckInput(input)
	if err != nil {
		return "", err
	}
	if r := jsontext.Value(s.opt.Redact(string(in))); r.IsValid() {
		in = r // a secret value in the input is never stored
	}
	doc := s.im.Doc
	var run store.Run
	err = s.opt.Store.Tx(ctx, func(tx store.Tx) error {
		var err error
		run, err = tx.CreateRun(store.Run{
			PlaybookID: playbook.Str(doc.Manifest.ID), PlaybookVersion: playbook.Str(doc.Manifest.Version),
			Document: doc.Source, HarnessPath: s.opt.HarnessPath, Input: in,
		})
		if err != nil {
			return err
		}
		// Owned from the creating commit (store.CreateClaimer): a
		// replica that dies before it executes the run leaves it to be
		// adopted.
		if c, ok := store.As[store.CreateClaimer](s.opt.Store); ok {
			if err := c.ClaimCreated(tx, run.ID); err != nil {
				return err
			}
		}
		if err := s.append(tx, run.ID, "", "", RunCreated{Playbook: run.PlaybookID, Version: run.PlaybookVersion, DocumentDigest: run.DocumentDigest, HarnessDigest: s.opt.HarnessDigest, InputDigest: digest(run.Input)}); err != nil {
			return err
		}
		if len(s.drift) == 0 {
			return nil
		}
		return s.append(tx, run.ID, "", "", s.driftEvent())
	})
	if err != nil {
		return "", fmt.Errorf("creating the run: %w", err)
	}
	s.progress("run %s started: %s %s", run.ID, run.PlaybookID, run.PlaybookVersion)
	s.sayDrift(run.ID)
	return run.ID, nil
}

// Resume continues a run from its last recorded point. Decisions made
// while no process ran it ([Decide]) take effect now. A started call
// without a recorded outcome is retried when it is a read call and marked
// outcome-unknown, waiting for a person, otherwise. A run started with
// other document bytes is refused.
func (s *Session) Resume(ctx context.Context, runID string) (Outcome, error) {
	// One process runs a run: a second resume while one is executing
	// fails here, before it can touch a call.
	unlock, err := s.opt.Store.LockRun(runID)
	if err != nil {
		return Outcome{Run: runID}, fmt.Errorf("run %s: %w", runID, err)
	}
	defer unlock()
	run, err := s.opt.Store.GetRun(ctx, runID)
	if err != nil {
		return Outcome{Run: runID}, err
	}
	if run.Status.Ended() {
		// Nothing runs, but an ending the chain does not record (a status
		// edited to completed) is a tamper verdict, not an outcome.
		if err := storeAsRecorded(ctx, s.opt.Store, runID, "resumed"); err != nil {
			return Outcome{Run: runID}, err
		}
		return Outcome{Run: runID, Status: Status(run.Status), Reason: run.Reason}, nil
	}
	ck, err := s.checkRun(ctx, run, "resume")
	if err != nil {
		return Outcome{Run: runID}, err
	}
	harness, changed := ck.harness, ck.changed
	if changed {
		if err := s.opt.Store.Tx(ctx, func(tx store.Tx) error {
			return s.append(tx, runID, "", "", RunHarnessChanged{From: harness, To: s.opt.HarnessDigest})
		}); err != nil {
			return Outcome{Run: runID}, err
		}
		s.progress("run %s: the harness changed since it was started; the change was accepted and recorded", runID)
	}
	if err := s.noteDrift(ctx, runID, ck.recs); err != nil {
		return Outcome{Run: runID}, err
	}
	if run.Status == store.RunWaiting {
		if err := s.opt.Store.Tx(ctx, func(tx store.Tx) error {
			if err := tx.SetRunStatus(runID, store.RunRunning, ""); err != nil {
				return err
			}
			return s.append(tx, runID, "", "", RunResumed{})
		}); err != nil {
			return Outcome{Run: runID}, err
		}
	}
	s.progress("run %s resumed at step %s", runID, run.CurrentStep)
	out, err := s.loop(ctx, runID)
	out.Run = runID
	return out, err
}

// runCheck is what [Session.checkRun] found.
type runCheck struct {
	recs    []audit.Record // the run's verified audit records
	harness string         // the digest of the harness the run was last run with
	changed bool           // this session's harness is another (and the change is accepted)
}

// checkRun does what runs before a run is continued (resumed or
// retried): the audit chain verifies; the harness is the one the run was
// last run with, unless the change is accepted; the store's rows agree
// with the chain ([Reconcile]); the document is the one the run was
// started with. verb is "resume" or "retry", for the errors.
func (s *Session) checkRun(ctx context.Context, run store.Run, verb string) (runCheck, error) {
	runID := run.ID
	past := map[string]string{"resume": "resumed", "retry": "retried"}[verb]
	hc, err := CheckHarness(ctx, s.opt.Store, runID, s.opt.HarnessDigest, s.opt.AcceptHarnessChange)
	if err != nil {
		return runCheck{}, err
	}
	if err := rowsAsRecorded(ctx, s.opt.Store, runID, past); err != nil {
		return runCheck{}, err
	}
	if run.DocumentDigest != s.im.Digest {
		return runCheck{}, fmt.Errorf("run %s was started with another version of the document (digest %s, this one %s); %s it with the document it was started with", runID, short(run.DocumentDigest), short(s.im.Digest), verb)
	}
	return runCheck{recs: hc.Records, harness: hc.Last, changed: hc.Changed}, nil
}

// storeAsRecorded fails with [ErrStoreAltered] when the run's chain does
// not verify or its rows disagree with it ([Disagreements]); past ("resumed",
// "retried") is for the error.
func storeAsRecorded(ctx context.Context, st store.Store, runID, past string) error {
	if _, err := verifiedRecords(ctx, st, runID); err != nil {
		return fmt.Errorf("run %s: %w", runID, err)
	}
	return rowsAsRecorded(ctx, st, runID, past)
}

// rowsAsRecorded is storeAsRecorded once the chain verified.
func rowsAsRecorded(ctx context.Context, st store.Store, runID, past string) error {
	ds, err := Disagreements(ctx, st, runID)
	if err != nil {
		return err
	}
	if len(ds) > 0 {
		return fmt.Errorf("run %s: %w, so it is not %s: %s (%d problems; `openplaybook audit --verify` lists them)", runID, ErrStoreAltered, past, ds[0].Message, len(ds))
	}
	return nil
}

// append writes ev to the run's audit log inside tx.
func (s *Session) append(tx store.Tx, run, step, tool string, ev Event) error {
	_, err := tx.Append(newRecord(s.opt.Redact, run, step, tool, ev))
	return err
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
