package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/driver/external"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/launch"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// Runner executes runs in this process: each run that is executing here
// has one goroutine, which opens the run's document (package launch),
// resumes it and closes what it opened when the run stops executing
// (completed, failed, rejected, or waiting for a person or its agent).
// Steps bound to driver "mcp" are served by the Runner's Exchange.
type Runner struct {
	h      *launch.Harness
	sec    *harness.Secrets // the server's resolver: redacts every secret looked up
	st     store.Store
	x      *external.Exchange
	events *Broker

	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	active map[string]*execution
	// refused holds, by run, why the last resume an agent's attach asked
	// for ([Runner.Kick]) was refused (redacted), until the run starts
	// executing here: the agent is told it ([Runner.Refusal]) instead of
	// only that no step waits for it.
	refused map[string]string
	wg      sync.WaitGroup

	replicas *replicas // nil: the store is not shared with other replicas
}

type execution struct {
	cancel context.CancelFunc
	done   chan struct{}
	doc    *playbook.Document // the run's document, as opened
}

// NewRunner returns a Runner over the harness and its open store.
func NewRunner(h *launch.Harness, st store.Store, x *external.Exchange, events *Broker) *Runner {
	ctx, cancel := context.WithCancel(context.Background())
	return &Runner{h: h, st: st, x: x, events: events, ctx: ctx, cancel: cancel, active: map[string]*execution{}, refused: map[string]string{}}
}

// ErrInput wraps an input that does not match the document's inputSchema
// (errors.Is finds it; the message is the runtime's, which says where).
var ErrInput = errors.New("the input does not match the document's inputSchema")

type inputError struct{ err error }

func (e inputError) Error() string   { return e.err.Error() }
func (e inputError) Unwrap() []error { return []error{ErrInput, e.err} }

// Create imports the document (name and src), checks it against the
// harness, creates a run with input and starts executing it here. It
// returns the run's id at once. With an error-level diagnostic it returns
// them and [runtime.ErrNotRunnable] or [launch.ErrHarness]; an input that
// does not match is wrapped in [ErrInput].
//
// A non-nil note is appended to the run's audit log before it starts
// executing (run.requested: who started it).
func (r *Runner) Create(ctx context.Context, name string, src []byte, input jsontext.Value, note runtime.Event) (string, []diag.Diagnostic, error) {
	pw := &progressWriter{b: r.events}
	o, ds, err := r.openWith(ctx, name, src, pw)
	if err != nil {
		return "", ds, err
	}
	id, err := o.Session.Create(ctx, input)
	pw.set(id)
	if err != nil {
		o.Close()
		var bad *runtime.InputError
		if errors.As(err, &bad) {
			return "", ds, inputError{err}
		}
		return "", ds, err
	}
	if note != nil {
		if err := runtime.Note(ctx, r.st, id, note, r.redact); err != nil {
			o.Close()
			return id, ds, fmt.Errorf("run %s was created but who started it could not be recorded (%v); it does not execute until resumed", id, err)
		}
	}
	r.start(id, o)
	return id, ds, nil
}

// ErrExecuting is returned when a run is already executing in this
// process.
var ErrExecuting = errors.New("the run is executing")

// Resume starts executing a run that is not executing here. The run's
// document is the one it was created with, checked again.
func (r *Runner) Resume(ctx context.Context, runID string) ([]diag.Diagnostic, error) {
	if r.Executing(runID) {
		return nil, ErrExecuting
	}
	run, err := r.st.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	if run.Status.Ended() {
		return nil, fmt.Errorf("run %s has ended (%s)", runID, run.Status)
	}
	st := r.store()
	release := func() {}
	if r.replicas != nil {
		// Another replica executing the run is told to the caller now
		// (409), not found by the execution later: the run lock (and
		// the claim) taken here is handed to the execution.
		h, err := holdLock(st, runID)
		if err != nil {
			return nil, err
		}
		release, st = h.release, h.store()
	}
	// The run's recorded harness is checked before anything of the
	// server's is used for it (launch.OpenRun): a run started with
	// another harness file is refused with runtime.ErrHarnessChanged.
	o, _, ds, err := launch.OpenRun(ctx, r.h, runID, launch.Options{Store: st, External: r.x.Driver(), Progress: &progressWriter{b: r.events, run: runID}})
	r.lookupSecrets(o)
	var hc *runtime.HarnessChangedError
	if errors.As(err, &hc) {
		release()
		return nil, harnessChanged(fmt.Sprintf("run %s was last run with another harness (digest %.12s, this server's %.12s); nothing was resumed: resume it with the harness file it was last run with (openplaybook resume --harness FILE %s), or accept this server's with openplaybook resume --accept-harness-change (recorded in the audit log)", runID, hc.Last, hc.This, runID))
	}
	if err != nil {
		release()
		return ds, err
	}
	if !r.start(runID, o) {
		release()
		return nil, ErrExecuting
	}
	return ds, nil // the execution takes the held lock
}

// Kick resumes the run if it waits for its agent, or for nothing but a
// resume, and is not executing here; errors are published as progress.
func (r *Runner) Kick(runID string) {
	run, err := r.st.GetRun(r.ctx, runID)
	if err != nil || run.Status != store.RunWaiting || r.Executing(runID) {
		return
	}
	pend, err := runtime.Pendings(r.ctx, r.st, runID)
	if err != nil {
		return
	}
	for _, p := range pend {
		if p.Kind != "agent" && p.Kind != "resume" {
			return // a person decides first
		}
	}
	if _, err := r.Resume(r.ctx, runID); err != nil && !errors.Is(err, ErrExecuting) {
		why := r.redact(err.Error())
		r.mu.Lock()
		if _, known := r.refused[runID]; known || len(r.refused) < maxRefusals {
			r.refused[runID] = why
		}
		r.mu.Unlock()
		r.events.Publish(runID, Event{Type: "progress", Text: "resume: " + why})
	}
}

// maxRefusals bounds the runs whose last refused resume [Runner.Kick]
// keeps: past it, a new run's refusal is only published as progress.
const maxRefusals = 1000

// Refusal is why the last resume of runID that an attaching agent asked
// for was refused (secrets redacted), or "" when none was or the run has
// executed here since.
func (r *Runner) Refusal(runID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused[runID]
}

func (r *Runner) redact(s string) string {
	if r.sec == nil {
		return s
	}
	return r.sec.Redact(s)
}

// Executing reports whether the run is executing in this process.
func (r *Runner) Executing(runID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active[runID] != nil
}

// AtExternalStep reports whether the run is executing here and is at a
// step an external agent serves: its current step (in the store: the
// step last started, or the entry step before the first) is an agent
// step bound to driver "mcp" whose agent is agent ("" for any agent).
// Such a step is published to the run's attached agents once the run
// reaches it, or the run stops executing here.
func (r *Runner) AtExternalStep(ctx context.Context, runID, agent string) bool {
	r.mu.Lock()
	e := r.active[runID]
	r.mu.Unlock()
	if e == nil || e.doc == nil || len(e.doc.Steps) == 0 {
		return false
	}
	run, err := r.st.GetRun(ctx, runID)
	if err != nil {
		return false
	}
	st := e.doc.StepWithID(run.CurrentStep)
	if run.CurrentStep == "" {
		st = e.doc.Steps[0]
	}
	if st == nil || playbook.Str(st.Kind) != "agent" {
		return false
	}
	name := playbook.Str(st.Agent)
	if agent != "" && name != agent {
		return false
	}
	b := r.h.H.Agents[name]
	return b != nil && b.Driver == external.Name
}

// Cancel stops executing the run here (if it is) and cancels it
// ([runtime.Cancel]).
func (r *Runner) Cancel(ctx context.Context, runID, by, reason string) error {
	r.mu.Lock()
	e := r.active[runID]
	r.mu.Unlock()
	if e != nil {
		e.cancel()
		<-e.done
	}
	err := runtime.Cancel(ctx, r.st, runID, by, reason)
	r.events.Publish(runID, Event{Type: "status"})
	return err
}

// store is the store an execution uses: with replicas, a view that
// claims the run for this replica and fences its writes.
func (r *Runner) store() store.Store {
	if r.replicas == nil {
		return r.st
	}
	return r.replicas.owned(r.st)
}

// Count returns how many runs execute here.
func (r *Runner) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.active)
}

// StopAll stops every execution here and waits for them (they stay
// resumable, by another replica or this one under its new id).
func (r *Runner) StopAll() {
	r.mu.Lock()
	es := make([]*execution, 0, len(r.active))
	for _, e := range r.active {
		es = append(es, e)
	}
	r.mu.Unlock()
	for _, e := range es {
		e.cancel()
	}
	for _, e := range es {
		<-e.done
	}
}

// Close stops executing every run (they stay resumable) and waits.
func (r *Runner) Close() {
	r.cancel()
	r.wg.Wait()
}

func (r *Runner) openWith(ctx context.Context, name string, src []byte, progress io.Writer) (*launch.Opened, []diag.Diagnostic, error) {
	o, ds, err := launch.Open(ctx, r.h, launch.Options{
		Name: name, Src: src, Store: r.store(), External: r.x.Driver(), Progress: progress,
	})
	r.lookupSecrets(o)
	return o, ds, err
}

// lookupSecrets looks up, in the server's resolver, the secrets o's
// document requires, so that the server redacts what they could reach it
// through (an error, a reason typed by a person) too. Nothing when o is
// nil (nothing was opened).
func (r *Runner) lookupSecrets(o *launch.Opened) {
	if o == nil || r.sec == nil || o.Doc.Requires == nil {
		return
	}
	for _, sc := range o.Doc.Requires.Secrets {
		_, _, _ = r.sec.Lookup(playbook.Str(sc.Name))
	}
}

// start runs o's run in a goroutine; false when it already executes.
func (r *Runner) start(runID string, o *launch.Opened) bool {
	r.mu.Lock()
	if r.active[runID] != nil {
		r.mu.Unlock()
		o.Close()
		return false
	}
	ctx, cancel := context.WithCancel(r.ctx)
	e := &execution{cancel: cancel, done: make(chan struct{}), doc: o.Doc}
	r.active[runID] = e
	delete(r.refused, runID)
	r.wg.Add(1)
	r.mu.Unlock()
	r.events.Publish(runID, Event{Type: "status"})
	go func() {
		defer r.wg.Done()
		defer close(e.done)
		defer cancel()
		defer o.Close()
		var out runtime.Outcome
		var err error
		for {
			out, err = o.Session.Resume(ctx, runID)
			// The run stops executing here unless an agent attached
			// after its step found none. That check and the end are one
			// step under r.mu, and an attach counts its session before
			// Kick reads r.active under r.mu: so either Kick sees the
			// run not executing (and the store already says it waits)
			// and resumes it, or this sees the session and goes on. No
			// attach falls between the two (a lost wake-up), and the run
			// never looks stopped to a session waiting for its step.
			r.mu.Lock()
			again := err == nil && ctx.Err() == nil && waitsForAgentOnly(out) && r.x.Attached(runID) > 0
			if !again {
				delete(r.active, runID)
			}
			r.mu.Unlock()
			if !again {
				break
			}
		}
		if err != nil && ctx.Err() == nil {
			r.events.Publish(runID, Event{Type: "progress", Text: "run " + runID + ": " + o.Host.Secrets.Redact(err.Error())})
		}
		r.events.Publish(runID, Event{Type: "status", Text: string(out.Status)})
	}()
	return true
}

// harnessChanged is the server's wording of a [runtime.HarnessChangedError]
// (this server has no --accept-harness-change); errors.Is finds
// runtime.ErrHarnessChanged in it.
type harnessChanged string

func (e harnessChanged) Error() string { return string(e) }
func (harnessChanged) Unwrap() error   { return runtime.ErrHarnessChanged }

// waitsForAgentOnly reports whether out is a run waiting for its
// external agent and for nothing a person decides.
func waitsForAgentOnly(out runtime.Outcome) bool {
	if out.Status != runtime.Waiting || len(out.Waiting) == 0 {
		return false
	}
	for _, p := range out.Waiting {
		if p.Kind != "agent" {
			return false
		}
	}
	return true
}

// progressWriter publishes a run's progress lines. Lines written before
// the run's id is known (what the runtime prints while it creates the run:
// its drift warnings) are kept, up to maxEarlyLines, and published when
// it is set.
type progressWriter struct {
	b     *Broker
	mu    sync.Mutex
	run   string
	early []string
}

// maxEarlyLines bounds the lines a progressWriter keeps before its run is
// known.
const maxEarlyLines = 200

func (w *progressWriter) set(run string) {
	w.mu.Lock()
	w.run = run
	early := w.early
	w.early = nil
	w.mu.Unlock()
	if run == "" {
		return
	}
	for _, l := range early {
		w.b.Publish(run, Event{Type: "progress", Text: l})
	}
}

func (w *progressWriter) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	w.mu.Lock()
	run := w.run
	if run == "" && len(w.early) < maxEarlyLines {
		w.early = append(w.early, line)
	}
	w.mu.Unlock()
	if run != "" {
		w.b.Publish(run, Event{Type: "progress", Text: line})
	}
	return len(p), nil
}
