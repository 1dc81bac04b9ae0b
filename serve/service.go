package serve

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/launch"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// The operations the HTTP API and the console share. Each returns what
// it shows with secret values redacted by the harness's resolver.

// Runs lists every run, newest first, as status shows them.
func (s *Server) Runs(ctx context.Context) ([]runtime.RunStatus, error) {
	runs, err := s.st.ListRuns(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]runtime.RunStatus, 0, len(runs))
	for _, r := range runs { // the store lists newest first
		rs, err := runtime.StatusOf(ctx, s.st, r, false)
		if err != nil {
			return nil, err
		}
		out = append(out, s.live(rs))
	}
	return out, nil
}

// live drops a "resume" item from what a run waits for when the run is
// executing here: the server has resumed it already.
func (s *Server) live(rs runtime.RunStatus) runtime.RunStatus {
	if !s.runner.Executing(rs.Run) {
		return rs
	}
	kept := rs.Waiting[:0:0]
	for _, p := range rs.Waiting {
		if p.Kind != "resume" {
			kept = append(kept, p)
		}
	}
	rs.Waiting = kept
	return rs
}

// Run returns one run with its steps; [store.ErrNotFound] when there is
// none.
func (s *Server) Run(ctx context.Context, runID string) (runtime.RunStatus, error) {
	r, err := s.st.GetRun(ctx, runID)
	if err != nil {
		return runtime.RunStatus{}, err
	}
	rs, err := runtime.StatusOf(ctx, s.st, r, true)
	return s.live(rs), err
}

// PendingItem is one decision a run waits for, with the run it belongs to.
type PendingItem struct {
	Run string `json:"run"`
	runtime.Pending
	// Views, for a call, are the read tools that show the current state
	// of its target ([runtime.ViewTools]; [Server.View] reads one); filled
	// in the API's answers only.
	Views []string `json:"views,omitempty"`
}

// Pending lists what runID waits for ("" for every waiting run).
func (s *Server) Pending(ctx context.Context, runID string) ([]PendingItem, error) {
	var ids []string
	if runID != "" {
		if _, err := s.st.GetRun(ctx, runID); err != nil {
			return nil, err
		}
		ids = []string{runID}
	} else {
		runs, err := s.st.ListRuns(ctx, store.RunWaiting, store.RunRunning)
		if err != nil {
			return nil, err
		}
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
	}
	out := []PendingItem{}
	for _, id := range ids {
		ps, err := runtime.Pendings(ctx, s.st, id)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			out = append(out, PendingItem{Run: id, Pending: p})
		}
	}
	return out, nil
}

// withViews fills in the Views of p's calls, reading each run's document
// once: the API's answer (the console reads the document for its cards
// and finds the views itself).
func (s *Server) withViews(ctx context.Context, p []PendingItem) error {
	docs := map[string]*playbook.Document{}
	for i := range p {
		it := &p[i]
		if (it.Kind != "call" && it.Kind != "outcome_unknown") || it.Altered != "" {
			continue
		}
		doc, ok := docs[it.Run]
		if !ok {
			rec, err := s.st.GetRun(ctx, it.Run)
			if err != nil {
				return err
			}
			doc, _ = playbook.Read("document of "+it.Run, rec.Document, nil)
			docs[it.Run] = doc
		}
		for _, v := range runtime.ViewTools(doc, it.Step, it.Tool, it.Arguments) {
			it.Views = append(it.Views, v.Name)
		}
	}
	return nil
}

// Decide decides a gate (by step id) or an approval (by id) of a run and,
// when the run then waits for nothing a person decides, resumes it here.
//
// With serve.oidc set, the decider is the verified identity ctx carries
// ([IdentityFrom]), whatever v.By says; one serve.oidc does not let decide
// gets an error wrapping [ErrNotDecider], and nothing is recorded.
func (s *Server) Decide(ctx context.Context, runID, id string, v runtime.Verdict) (runtime.Decided, error) {
	v, err := s.mayDecide(ctx, runID, v)
	if err != nil {
		return runtime.Decided{}, err
	}
	d, err := runtime.Decide(ctx, s.st, runID, id, v)
	if err != nil {
		return d, err
	}
	s.events.Publish(runID, Event{Type: "status"})
	s.afterDecision(runID)
	return d, nil
}

// MayDecide says whether the person ctx carries may approve now what run
// runID waits for under id (a waiting gate's step id, or an approval id),
// recording nothing: nil when [Server.Decide] would take their approval;
// an error wrapping [ErrNotDecider] when serve.oidc or the harness policy
// does not let them (the operator token with serve.oidc; not one of
// serve.oidc.deciders; not a rule's decider; self-approval; already one
// of the approvers of what needs several); otherwise what
// [runtime.MayDecide] returns. Without serve.oidc, whoever holds the
// operator token decides everything no policy rule names deciders for.
//
// With runID "", it says only whether the person may decide at all
// (serve.oidc and its deciders).
func (s *Server) MayDecide(ctx context.Context, runID, id string) error {
	v, err := s.mayDecide(ctx, runID, runtime.Verdict{Approve: true})
	if err != nil || runID == "" {
		return err
	}
	return runtime.MayDecide(ctx, s.st, runID, id, v)
}

// afterDecision resumes the run when nothing is left for a person and it
// is not executing here; an executing run (an external agent waiting for
// an approval) sees the decision itself.
func (s *Server) afterDecision(runID string) {
	if s.runner.Executing(runID) {
		return
	}
	ps, err := runtime.Pendings(context.Background(), s.st, runID)
	if err != nil {
		return
	}
	for _, p := range ps {
		if p.Kind == "gate" || p.Kind == "call" || p.Kind == "outcome_unknown" {
			return
		}
	}
	if len(ps) == 1 && ps[0].Kind == "agent" && s.x.Attached(runID) == 0 {
		return // resumes when its agent connects
	}
	_, _ = s.runner.Resume(context.Background(), runID)
}

// AuditResult is a run's audit log, verified when asked.
type AuditResult struct {
	Run     string         `json:"run"`
	Records []audit.Record `json:"records"`
	// Verified and Problems are set when verification was asked for.
	Verified *bool          `json:"verified,omitempty"`
	Problems []AuditProblem `json:"problems,omitempty"`
}

// AuditProblem is one thing verification found.
type AuditProblem struct {
	Seq     int64  `json:"seq"`
	Message string `json:"message"`
}

// Audit returns a run's audit log; with verify, the chain is verified and
// the store's rows reconciled with it (as `audit --verify`).
func (s *Server) Audit(ctx context.Context, runID string, verify bool) (AuditResult, error) {
	if _, err := s.st.GetRun(ctx, runID); err != nil {
		return AuditResult{}, err
	}
	if !verify {
		recs, err := s.st.Audit(ctx, runID)
		if err != nil {
			return AuditResult{}, err
		}
		if recs == nil {
			recs = []audit.Record{}
		}
		return AuditResult{Run: runID, Records: recs}, nil
	}
	// The records shown are the ones verified: one read of one snapshot.
	recs := []audit.Record{}
	probs, err := runtime.VerifyRun(ctx, s.st, runID, func(r audit.Record) error {
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return AuditResult{}, err
	}
	ps := []AuditProblem{}
	for _, p := range probs {
		ps = append(ps, AuditProblem{Seq: p.Seq, Message: p.Message})
	}
	ok := len(ps) == 0
	return AuditResult{Run: runID, Records: recs, Verified: &ok, Problems: ps}, nil
}

// CreateRun checks the document and starts a run of it here.
//
// With serve.oidc set, the run's audit log records who started it
// (run.requested, after run.created), from the identity ctx carries.
func (s *Server) CreateRun(ctx context.Context, name string, doc []byte, input jsontext.Value) (string, []diag.Diagnostic, error) {
	return s.runner.Create(ctx, name, doc, input, s.requested(ctx))
}

// CancelRun stops and cancels a run. With serve.oidc set, by is the
// verified identity ctx carries.
func (s *Server) CancelRun(ctx context.Context, runID, by, reason string) error {
	return s.runner.Cancel(ctx, runID, s.byFrom(ctx, by), reason)
}

// ResumeRun resumes a run here.
func (s *Server) ResumeRun(ctx context.Context, runID string) ([]diag.Diagnostic, error) {
	if _, err := s.st.GetRun(ctx, runID); err != nil {
		return nil, err
	}
	return s.runner.Resume(ctx, runID)
}

// IsNotFound reports whether err says a run (or what was asked for) does
// not exist.
func IsNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

// View reads the current state of the target of the call that approval
// id of run waits on, with the read tool named tool, for the person
// deciding it ([runtime.Session.View]: a read tool of the same step and
// connector or MCP server, with arguments taken from the waiting call,
// through the decision path, recorded as a view.read audit record). The
// person is who may decide the run's approvals (with serve.oidc, the
// verified identity in ctx, else by as given, "console" when empty); one
// who may not gets an error wrapping [ErrNotDecider] and nothing is read.
// The run is opened with this server's harness as a resume would open it
// (the harness checked first), without taking the run: a run executing
// elsewhere is not disturbed. Errors: [runtime.ErrNotViewable] (nothing
// was read), [runtime.ErrStoreAltered], a harness that changed since the
// run last ran, store errors.
func (s *Server) View(ctx context.Context, runID, id, tool, by string) (runtime.Viewed, error) {
	v, err := s.mayDecide(ctx, runID, runtime.Verdict{By: by})
	if err != nil {
		return runtime.Viewed{}, err
	}
	if v.By == "" {
		v.By = "console"
	}
	run, err := s.st.GetRun(ctx, runID)
	if err != nil {
		return runtime.Viewed{}, err
	}
	if run.Status.Ended() {
		return runtime.Viewed{}, fmt.Errorf("%w: run %s has ended (%s)", runtime.ErrNotViewable, runID, run.Status)
	}
	o, _, ds, err := launch.OpenRun(ctx, s.runner.h, runID, launch.Options{Store: s.st})
	if err != nil {
		msg := err.Error()
		for _, d := range ds {
			if d.Severity == diag.Error {
				msg += "; " + d.Message
				break
			}
		}
		return runtime.Viewed{}, fmt.Errorf("run %s could not be opened for its view: %s", runID, s.redact(msg))
	}
	defer o.Close()
	got, err := o.Session.View(ctx, runID, id, tool, v.By)
	if err != nil {
		return runtime.Viewed{}, redactedError{msg: s.redact(err.Error()), err: err}
	}
	return got, nil
}

// redactedError is err with its message redacted; errors.Is and As
// still see err.
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }
