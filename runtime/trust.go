package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// ErrStoreAltered is wrapped by the errors that say the store's rows
// disagree with the run's verified audit chain: a row changed by anything
// but the runtime (a decision flipped in SQLite, a call's state edited).
// The runtime refuses to go on with such a run.
var ErrStoreAltered = errors.New("the store was altered")

// recordData is what the checks read of an audit record's data.
type recordData struct {
	Approval       string `json:"approval"`
	ArgsDigest     string `json:"argsDigest"`
	BindDigest     string `json:"bindDigest"`
	Attempt        *int   `json:"attempt"`
	Index          *int   `json:"index"`
	DocumentDigest string `json:"documentDigest"`
	HarnessDigest  string `json:"harnessDigest"`
	InputDigest    string `json:"inputDigest"`
	ResultDigest   string `json:"resultDigest"`
	OutputDigest   string `json:"outputDigest"`
}

func dataOf(r audit.Record) recordData {
	var d recordData
	if len(r.Data) > 0 {
		_ = json.Unmarshal(r.Data, &d)
	}
	return d
}

// verifiedRecords returns a run's audit records once the chain verifies.
func verifiedRecords(ctx context.Context, st *store.Store, run string) ([]audit.Record, error) {
	probs, err := st.VerifyAudit(ctx, run)
	if err != nil {
		return nil, err
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%w: the audit chain of run %s does not verify (%s)", ErrStoreAltered, run, probs[0].Message)
	}
	return st.Audit(ctx, run)
}

// decided checks that a person's decision the runtime is about to follow
// is in the run's verified audit chain: a record of kind kind, for the
// approval id (approval != "") or for the gate step and attempt. A
// decision row with no such record was not made through [Decide].
func decided(ctx context.Context, st *store.Store, run string, kind EventKind, approval, step string, attempt int) error {
	recs, err := verifiedRecords(ctx, st, run)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.Kind != string(kind) {
			continue
		}
		d := dataOf(r)
		if approval != "" && d.Approval == approval {
			return nil
		}
		if approval == "" && r.Step == step && d.Attempt != nil && *d.Attempt == attempt {
			return nil
		}
	}
	what := "approval " + approval
	if approval == "" {
		what = fmt.Sprintf("gate %s (attempt %d)", step, attempt)
	}
	return fmt.Errorf("%w: %s is decided in the store, but the run's audit log has no %s record of it; nothing was run (compare `openplaybook audit --verify`)", ErrStoreAltered, what, kind)
}

// approvalRecorded checks, before an approval lets a call run, that the
// run's verified chain says exactly this: the approval was asked for
// this call (step, attempt, index, tool, arguments digest and, for a
// call approval, bind digest: approval.requested; or call.outcome-unknown
// for a re-run), a person approved it (approval.approved), and no call
// has run on it yet. A row changed by any other process (its digests, its
// status, its use) fails here.
func approvalRecorded(ctx context.Context, st *store.Store, a store.Approval) error {
	recs, err := verifiedRecords(ctx, st, a.Run)
	if err != nil {
		return err
	}
	var asked, approved, used bool
	for _, r := range recs {
		d := dataOf(r)
		if d.Approval != a.ID {
			continue
		}
		switch EventKind(r.Kind) {
		case KindApprovalRequested:
			asked = a.Kind == store.KindCall && r.Step == a.Step && r.Tool == a.Tool && a.Call != nil &&
				d.Attempt != nil && *d.Attempt == a.Call.Attempt && d.Index != nil && *d.Index == a.Call.Index &&
				d.ArgsDigest == a.ArgsDigest && d.BindDigest == a.DefDigest
		case KindCallOutcomeUnknown:
			asked = a.Kind == store.KindOutcomeUnknown && r.Step == a.Step && r.Tool == a.Tool && a.Call != nil &&
				d.Attempt != nil && *d.Attempt == a.Call.Attempt && d.Index != nil && *d.Index == a.Call.Index
		case KindApprovalApproved:
			approved = true
		case KindCallStarted, KindCallRerun:
			used = true
		}
	}
	switch {
	case !asked:
		return fmt.Errorf("%w: approval %s does not match what the audit log says was asked (step, call, tool, arguments or definition); nothing was run", ErrStoreAltered, a.ID)
	case !approved:
		return fmt.Errorf("%w: approval %s is approved in the store, but the run's audit log has no approval.approved record of it; nothing was run", ErrStoreAltered, a.ID)
	case used:
		return fmt.Errorf("%w: approval %s was already used by a call the audit log records; nothing was run again", ErrStoreAltered, a.ID)
	}
	return nil
}

// Reconcile compares a run's rows (the run, its steps, calls, approvals
// and gates) with what its verified audit chain recorded, and returns
// every disagreement, none when the store is as the runtime left it.
// The chain itself is store.VerifyAudit's: check it first, since a
// record that does not verify proves nothing. `openplaybook audit
// --verify` and [Session.Resume] use both.
//
// What it holds: the run row's document digest is the one run.created
// recorded; an ended run's status is its last ending record's, and a run
// that has not ended has none since its last run.retried (a failed run
// runs again only through [Session.Retry]); every call row's state is
// the one its last record (by step, attempt and index) gives, and every
// call record names a call row; every decided approval and gate has its
// decision record; a done or failed step has its record.
func Reconcile(ctx context.Context, st *store.Store, runID string) ([]string, error) {
	// The log and the rows are read in several reads. A run that another
	// goroutine or process executes may change between them, and every
	// change appends to the log in its transaction: when the log's head
	// is the same before and after, the reads saw one state.
	const tries = 8
	for i := 0; ; i++ {
		before, _, err := st.AuditHead(ctx, runID)
		if err != nil {
			return nil, err
		}
		out, err := reconcileOnce(ctx, st, runID)
		if err != nil {
			return nil, err
		}
		after, _, err := st.AuditHead(ctx, runID)
		if err != nil {
			return nil, err
		}
		if before == after || len(out) == 0 {
			return out, nil
		}
		if i == tries-1 {
			return nil, fmt.Errorf("run %s: %w (it changed during each of %d reads); verify again when it waits or has ended", runID, ErrRunChanging, tries)
		}
	}
}

// ErrRunChanging is returned by [Reconcile] when the run kept changing
// while it was read (another process or goroutine executes it), so no
// consistent reading of its rows and log was had: nothing is concluded.
var ErrRunChanging = errors.New("the run is executing and changed while it was verified")

func reconcileOnce(ctx context.Context, st *store.Store, runID string) ([]string, error) {
	var out []string
	recs, err := st.Audit(ctx, runID)
	if err != nil {
		return nil, err
	}
	run, err := st.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	has := func(kind EventKind, match func(audit.Record, recordData) bool) bool {
		for _, r := range recs {
			if r.Kind == string(kind) && match(r, dataOf(r)) {
				return true
			}
		}
		return false
	}

	if len(recs) == 0 || recs[0].Kind != string(KindRunCreated) {
		out = append(out, "the audit log does not begin with run.created")
	} else {
		d := dataOf(recs[0])
		if d.DocumentDigest != run.DocumentDigest || digest(run.Document) != run.DocumentDigest {
			out = append(out, fmt.Sprintf("the run's document (digest %s) is not the one run.created recorded (%s)", short(digest(run.Document)), short(d.DocumentDigest)))
		}
		if d.InputDigest != digest(run.Input) {
			out = append(out, fmt.Sprintf("the run's input (digest %s) is not the one run.created recorded (%s)", short(digest(run.Input)), short(d.InputDigest)))
		}
	}
	// The run's status is the one its last ending record (run.completed,
	// run.failed, run.rejected) gives, unless a run.retried record came
	// after it: a retried run is running again (or waiting).
	ending := map[store.RunStatus]EventKind{store.RunCompleted: KindRunCompleted, store.RunFailed: KindRunFailed, store.RunRejected: KindRunRejected}
	var lastEnd EventKind
	for _, r := range recs {
		switch k := EventKind(r.Kind); k {
		case KindRunCompleted, KindRunFailed, KindRunRejected:
			lastEnd = k
		case KindRunRetried:
			lastEnd = ""
		}
	}
	if k, ok := ending[run.Status]; ok && lastEnd != k {
		out = append(out, fmt.Sprintf("the run is %s, but no %s record says so", run.Status, k))
	} else if !ok && lastEnd != "" {
		out = append(out, fmt.Sprintf("the run is %s in the store, but its audit log last recorded %s, and no run.retried after it", run.Status, lastEnd))
	}

	// Calls: the state each call's last record gives.
	type callKey struct {
		step           string
		attempt, index int
	}
	last := map[callKey]EventKind{}
	argsOf := map[callKey]string{}   // the arguments digest the call's records give
	resultOf := map[callKey]string{} // the digest of the result call.succeeded kept
	for _, r := range recs {
		d := dataOf(r)
		if d.Index == nil || d.Attempt == nil || !isCallKind(EventKind(r.Kind)) {
			continue
		}
		k := callKey{r.Step, *d.Attempt, *d.Index}
		last[k] = EventKind(r.Kind)
		if d.ArgsDigest != "" {
			argsOf[k] = d.ArgsDigest
		}
		if EventKind(r.Kind) == KindCallSucceeded {
			resultOf[k] = d.ResultDigest
		}
	}
	calls, err := st.Calls(ctx, runID, store.CallFilter{})
	if err != nil {
		return nil, err
	}
	for _, c := range calls {
		k := callKey{c.Step, c.Attempt, c.Index}
		kind, ok := last[k]
		delete(last, k)
		if !ok {
			out = append(out, fmt.Sprintf("%s (%s) has no audit record", c.CallKey, c.State))
			continue
		}
		if want := stateOf(kind, c.State); want != c.State {
			out = append(out, fmt.Sprintf("%s is %s in the store, but its last audit record is %s (%s)", c.CallKey, c.State, kind, want))
		}
		if a, ok := argsOf[k]; ok && a != c.ArgsDigest {
			out = append(out, fmt.Sprintf("%s has arguments digest %s in the store, but its audit records say %s", c.CallKey, short(c.ArgsDigest), short(a)))
		}
		if r, ok := resultOf[k]; ok && c.State == store.CallSucceeded && r != digest(c.Result) {
			out = append(out, fmt.Sprintf("%s has a result in the store that is not the one call.succeeded recorded (digest %s, recorded %s)", c.CallKey, short(digest(c.Result)), short(r)))
		}
	}
	for k, kind := range last {
		out = append(out, fmt.Sprintf("audit record %s names call %d of step %q attempt %d, which the store does not have", kind, k.index, k.step, k.attempt))
	}

	apr, err := st.Approvals(ctx, runID)
	if err != nil {
		return nil, err
	}
	uses := map[string]int{}
	for _, r := range recs {
		if k := EventKind(r.Kind); k == KindCallStarted || k == KindCallRerun {
			if d := dataOf(r); d.Approval != "" {
				uses[d.Approval]++
			}
		}
	}
	for _, a := range apr {
		id := a.ID
		byID := func(_ audit.Record, d recordData) bool { return d.Approval == id }
		if a.Kind == store.KindCall && !has(KindApprovalRequested, func(r audit.Record, d recordData) bool {
			return d.Approval == id && d.ArgsDigest == a.ArgsDigest && d.BindDigest == a.DefDigest && r.Step == a.Step && r.Tool == a.Tool
		}) {
			out = append(out, fmt.Sprintf("approval %s is not what its approval.requested record asked for (step, tool, arguments or definition differ)", id))
		}
		if uses[id] > 1 || uses[id] == 1 && a.Status != store.ApprovalUsed {
			out = append(out, fmt.Sprintf("approval %s is %s in the store, but %d calls ran on it", id, a.Status, uses[id]))
		}
		switch a.Status {
		case store.ApprovalApproved, store.ApprovalUsed:
			if !has(KindApprovalApproved, byID) {
				out = append(out, fmt.Sprintf("approval %s is %s in the store, but no approval.approved record says a person approved it", id, a.Status))
			}
		case store.ApprovalDenied:
			if !has(KindApprovalDenied, byID) {
				out = append(out, fmt.Sprintf("approval %s is denied in the store, but no approval.denied record says so", id))
			}
		case store.ApprovalPending:
			if !has(KindApprovalRequested, byID) && !has(KindCallOutcomeUnknown, byID) {
				out = append(out, fmt.Sprintf("approval %s is pending in the store, but no record asked for it", id))
			}
		}
	}
	gates, err := st.Gates(ctx, runID)
	if err != nil {
		return nil, err
	}
	for _, g := range gates {
		step, attempt := g.Step, g.Attempt
		match := func(r audit.Record, d recordData) bool {
			return r.Step == step && d.Attempt != nil && *d.Attempt == attempt
		}
		switch g.Status {
		case store.GateApproved:
			if !has(KindGateApproved, match) {
				out = append(out, fmt.Sprintf("gate %s (attempt %d) is approved in the store, but no gate.approved record says so", step, attempt))
			}
		case store.GateRejected:
			if !has(KindGateRejected, match) {
				out = append(out, fmt.Sprintf("gate %s (attempt %d) is rejected in the store, but no gate.rejected record says so", step, attempt))
			}
		}
	}
	steps, err := st.Steps(ctx, runID)
	if err != nil {
		return nil, err
	}
	// The run is where its last step.started (or step.retried) record
	// put it.
	current := ""
	for _, r := range recs {
		if r.Kind == string(KindStepStarted) || r.Kind == string(KindStepRetried) {
			current = r.Step
		}
	}
	if run.CurrentStep != current {
		out = append(out, fmt.Sprintf("the run's current step is %q in the store, but the audit log last started %q", run.CurrentStep, current))
	}
	for _, s := range steps {
		step, attempt := s.Step, s.Attempt
		match := func(r audit.Record, d recordData) bool {
			return r.Step == step && d.Attempt != nil && *d.Attempt == attempt
		}
		if !has(KindStepStarted, match) && !has(KindStepRetried, match) {
			out = append(out, fmt.Sprintf("step %s (attempt %d) is in the store, but no step.started or step.retried record started it", step, attempt))
		}
		switch s.Status {
		case store.StepDone:
			if !has(KindStepFinished, match) && !has(KindGateApproved, match) && !has(KindGateRejected, match) {
				out = append(out, fmt.Sprintf("step %s (attempt %d) is done in the store, but no record says it finished", step, attempt))
			}
			output := digest(s.Output)
			if has(KindStepFinished, match) && !has(KindStepFinished, func(r audit.Record, d recordData) bool { return match(r, d) && d.OutputDigest == output }) {
				out = append(out, fmt.Sprintf("step %s (attempt %d) has an output in the store that is not the one step.finished recorded", step, attempt))
			}
		case store.StepFailed:
			if !has(KindStepFailed, match) {
				out = append(out, fmt.Sprintf("step %s (attempt %d) failed in the store, but no step.failed record says so", step, attempt))
			}
		}
	}
	return out, nil
}

func isCallKind(k EventKind) bool {
	switch k {
	case KindCallStarted, KindCallRefused, KindCallWaiting, KindCallSucceeded, KindCallFailed,
		KindCallRetried, KindCallRerun, KindCallOutcomeUnknown:
		return true
	}
	return false
}

// stateOf is the call state a call's last record gives; have is returned
// when the record allows it.
func stateOf(k EventKind, have store.CallState) store.CallState {
	switch k {
	case KindCallRerun:
		// A re-run a person approved runs from outcome_unknown (the row
		// stays so until its outcome is recorded).
		return store.CallOutcomeUnknown
	case KindCallStarted, KindCallRetried:
		return store.CallStarted
	case KindCallRefused:
		return store.CallRefused
	case KindCallWaiting:
		return store.CallWaiting
	case KindCallSucceeded:
		return store.CallSucceeded
	case KindCallFailed:
		return store.CallFailed
	case KindCallOutcomeUnknown:
		return store.CallOutcomeUnknown
	}
	return have
}
