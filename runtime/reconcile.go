package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// A Disagreement is one way a run's rows differ from what its audit
// chain recorded ([Disagreements]): a tamper verdict. Table and Column
// name the store's column (see [store.ChainedColumns]); Column is ""
// when a whole row is missing from one side. Row names the row ("call 0
// of step \"act\" attempt 1", "approval apr_...", "run run_..."). Seq is
// the audit record that says otherwise, 0 when the chain has no record
// of the row at all.
type Disagreement struct {
	Table, Row, Column string
	Seq                int64
	// Message says what the store holds and what the record says, on one
	// line.
	Message string
}

func (d Disagreement) String() string { return d.Message }

// Reconcile is [Disagreements] as messages, one a disagreement.
func Reconcile(ctx context.Context, st store.Store, runID string) ([]string, error) {
	ds, err := Disagreements(ctx, st, runID)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range ds {
		out = append(out, d.Message)
	}
	return out, nil
}

// Disagreements compares a run's rows (the run, its steps, calls,
// approvals and gates) with what its audit chain recorded, column by
// column, and returns every disagreement, none when the store is as the
// runtime left it. Every column [store.ChainedColumns] lists is
// compared; a row the chain does not name, and a row the chain names
// that the store lacks, are disagreements too. The chain itself is
// store.VerifyAudit's: check it first, since a record that does not
// verify proves nothing. `openplaybook audit --verify` and
// [Session.Resume] use both. The log is read and walked once; each row
// is then compared in constant time. On an engine that reads calls in
// pages ([store.CallPager]) a call is compared as the walk passes its
// end, so memory does not grow with the number of calls; when anything
// about the calls disagrees the run is compared again whole, for the
// messages.
//
// docs/runtime.md ("What the audit chain covers") lists what each
// column is compared with.
func Disagreements(ctx context.Context, st store.Store, runID string) ([]Disagreement, error) {
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

// rowCheck gathers the disagreements of one row.
type rowCheck struct {
	out        *[]Disagreement
	table, row string
}

// col reports a column whose stored value is not the chain's: have and
// want are shown as given (quote or shorten them first).
func (c rowCheck) col(column string, src at, have, want string) {
	msg := fmt.Sprintf("%s row %s: column %s is %s in the store, but audit record %d (%s) says %s", c.table, c.row, column, have, src.seq, src.kind, want)
	if src.seq == 0 {
		msg = fmt.Sprintf("%s row %s: column %s is %s in the store, but the audit log says %s", c.table, c.row, column, have, want)
	}
	*c.out = append(*c.out, Disagreement{Table: c.table, Row: c.row, Column: column, Seq: src.seq, Message: msg})
}

// eq compares a string column.
func (c rowCheck) eq(column string, src at, have, want string) {
	if have != want {
		c.col(column, src, shown(have), shown(want))
	}
}

// eqDigest compares a column by its SHA-256 (have is the stored value's).
func (c rowCheck) eqDigest(column string, src at, have, want string) {
	if have != want {
		c.col(column, src, "digest "+short(have), "digest "+short(want))
	}
}

// missing reports a row the chain has no record of.
func (c rowCheck) missing(what string) {
	*c.out = append(*c.out, Disagreement{Table: c.table, Row: c.row, Message: fmt.Sprintf("%s row %s is in the store, but no audit record %s", c.table, c.row, what)})
}

// lacks reports a row the chain names that the store does not have.
func lacks(out *[]Disagreement, table, row string, src at) {
	*out = append(*out, Disagreement{Table: table, Row: row, Seq: src.seq, Message: fmt.Sprintf("audit record %d (%s) names %s, which the store does not have (no %s row)", src.seq, src.kind, row, table)})
}

// shown renders a stored value in a message: quoted, cut at 80 bytes.
func shown(s string) string {
	if len(s) > 80 {
		return quote(s[:80]) + "..."
	}
	return quote(s)
}

func reconcileOnce(ctx context.Context, st store.Store, runID string) ([]Disagreement, error) {
	walk := storeWalk(ctx, st, runID)
	if p, ok := store.As[store.CallPager](st); ok {
		n, err := p.CallCount(ctx, runID)
		if err != nil {
			return nil, err
		}
		// A run of a few pages of calls is read whole: one read instead
		// of one (or more) per step attempt, in bounded memory anyway.
		if n > wholeCalls {
			out, ok, err := reconcilePaged(ctx, st, p, walk, runID, n)
			if err != nil || ok {
				return out, err
			}
		}
	}
	return reconcileWhole(ctx, st, walk, runID)
}

// rowReads is what reconciliation reads of a run's rows: a
// [store.Store], or a [store.Snapshot] of one.
type rowReads interface {
	GetRun(ctx context.Context, id string) (store.Run, error)
	Steps(ctx context.Context, run string) ([]store.Step, error)
	Calls(ctx context.Context, run string, f store.CallFilter) ([]store.Call, error)
	Approvals(ctx context.Context, run string) ([]store.Approval, error)
	Gates(ctx context.Context, run string) ([]store.Gate, error)
}

// logWalk calls fn with each record of a run's log, in seq order, and
// returns fn's error or the read's.
type logWalk func(fn func(audit.Record) error) error

// storeWalk walks run's log in st with [store.EachAudit].
func storeWalk(ctx context.Context, st store.Store, runID string) logWalk {
	return func(fn func(audit.Record) error) error { return store.EachAudit(ctx, st, runID, fn) }
}

// reconcileWhole is reconcileOnce with every call of the run read at
// once and compared once the chain is walked.
func reconcileWhole(ctx context.Context, rd rowReads, walk logWalk, runID string) ([]Disagreement, error) {
	// The log is walked as it is read, a page at a time: what is kept is
	// what each row must hold, not the records.
	ch := newChain()
	if err := walk(func(r audit.Record) error {
		ch.add(&r)
		return nil
	}); err != nil {
		return nil, err
	}
	return compareWhole(ctx, rd, ch, runID)
}

// compareWhole compares every row of the run with ch, a walk of its
// whole log, reading the calls at once.
func compareWhole(ctx context.Context, rd rowReads, ch *chain, runID string) ([]Disagreement, error) {
	var out []Disagreement
	run, err := rd.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	reconcileRun(&out, ch, run)
	calls, err := rd.Calls(ctx, runID, store.CallFilter{})
	if err != nil {
		return nil, err
	}
	reconcileCalls(&out, ch, calls, true)
	return out, reconcileRest(ctx, rd, &out, ch, runID)
}

// reconcileRest compares the run's approvals, gates and steps with ch.
func reconcileRest(ctx context.Context, rd rowReads, out *[]Disagreement, ch *chain, runID string) error {
	apr, err := rd.Approvals(ctx, runID)
	if err != nil {
		return err
	}
	reconcileApprovals(out, ch, apr, true)
	gates, err := rd.Gates(ctx, runID)
	if err != nil {
		return err
	}
	reconcileGates(out, ch, gates)
	steps, err := rd.Steps(ctx, runID)
	if err != nil {
		return err
	}
	reconcileSteps(out, ch, steps)
	return nil
}

func reconcileRun(out *[]Disagreement, ch *chain, run store.Run) {
	c := rowCheck{out, "runs", "run " + run.ID}
	if ch.created == nil {
		*out = append(*out, Disagreement{Table: "runs", Row: c.row, Message: "the audit log does not begin with run.created"})
	} else {
		src, d := at{ch.created.Seq, KindRunCreated}, ch.createdD
		c.eq("playbook_id", src, run.PlaybookID, d.Playbook)
		c.eq("playbook_version", src, run.PlaybookVersion, d.Version)
		c.eq("document_digest", src, run.DocumentDigest, d.DocumentDigest)
		c.eqDigest("document", src, digest(run.Document), d.DocumentDigest)
		c.eqDigest("input", src, digest(run.Input), d.InputDigest)
	}
	// The run's status is the one its last ending record (run.completed,
	// run.failed, run.rejected) gives, unless a run.retried record came
	// after it: a retried run is running again (or waiting).
	ending := map[store.RunStatus]EventKind{store.RunCompleted: KindRunCompleted, store.RunFailed: KindRunFailed, store.RunRejected: KindRunRejected}
	src := at{ch.lastEndSeq, ch.lastEnd}
	if k, ok := ending[run.Status]; ok && ch.lastEnd != k {
		var want string
		switch {
		case ch.lastEnd != "":
			want = "it ended " + strings.TrimPrefix(string(ch.lastEnd), "run.")
		case src.seq > 0: // a run.retried after the last ending
			src.kind, want = KindRunRetried, "it runs again"
		default:
			src, want = ch.end, "the run has not ended (the log records no ending)"
		}
		c.col("status", src, string(run.Status), want)
	} else if !ok && ch.lastEnd != "" {
		c.col("status", src, string(run.Status), "it ended "+strings.TrimPrefix(string(ch.lastEnd), "run.")+", and no run.retried came after")
	} else if !ok && ch.waiting.seq > 0 && run.Status != store.RunWaiting {
		// After run.waiting only a resume (run.resumed) runs it again. A
		// run resumed may wait again without a record (a gate still
		// undecided), so running is not required after run.resumed.
		c.col("status", ch.waiting, string(run.Status), "waiting, and no run.resumed came after")
	}
	// The run is where its last step.started (or step.retried) record
	// put it.
	c.eq("current_step", ch.currentAt, run.CurrentStep, ch.current)
}

// reconcileCalls compares call rows with the chain; complete says they
// are all the run's, so that a call the chain names and the rows lack is
// reported too.
func reconcileCalls(out *[]Disagreement, ch *chain, calls []store.Call, complete bool) {
	seen := make(map[callKey]bool, len(calls))
	for i := range calls {
		row := &calls[i]
		k := callKey{row.Step, row.Attempt, row.Index}
		c := rowCheck{out, "calls", fmt.Sprintf("call %d of step %q attempt %d", row.Index, row.Step, row.Attempt)}
		cc := ch.calls[k]
		if cc == nil || seen[k] {
			c.missing("names it (call.started, call.refused or call.waiting)")
			continue
		}
		seen[k] = true
		reconcileCall(c, row, cc)
	}
	for _, k := range ch.callOrder {
		if complete && !seen[k] {
			lacks(out, "calls", fmt.Sprintf("call %d of step %q attempt %d", k.index, k.step, k.attempt), ch.calls[k].first)
		}
	}
}

// reconcileCall compares one call row with what the chain says of it.
func reconcileCall(c rowCheck, row *store.Call, cc *chainCall) {
	d := cc.firstD
	c.eq("tool", cc.first, recordTool(row.Tool), cc.tool)
	c.eq("def_digest", cc.first, row.DefDigest, d.DefDigest)
	if cc.args != "" {
		c.eq("args_digest", cc.argsAt, row.ArgsDigest, cc.args)
	}
	// What is stored of the arguments (what a person is shown) hashes
	// to the recorded arguments digest, or to the recorded digest of
	// their redacted form.
	wantArgs := d.StoredArgsDigest
	if wantArgs == "" {
		wantArgs = d.ArgsDigest
	}
	c.eqDigest("args", cc.first, digest(row.Args), wantArgs)
	if row.SideEffecting != d.SideEffecting {
		c.col("side_effecting", cc.first, fmt.Sprint(row.SideEffecting), fmt.Sprint(d.SideEffecting))
	}
	c.eq("decision", cc.decided, string(row.Decision), string(decisionOf(cc.decided.kind)))
	c.eq("code", cc.decided, row.Code, cc.code)
	if !cc.unknown {
		c.eq("reason", cc.reasonAt, row.Reason, cc.reason)
	}
	if want := stateOf(cc.last.kind, row.State); want != row.State {
		c.col("state", cc.last, string(row.State), string(want))
	}
	switch {
	case row.State == store.CallSucceeded && cc.resultAt.seq > 0:
		c.eqDigest("result", cc.resultAt, digest(row.Result), cc.result)
	case row.State != store.CallSucceeded && row.Result != nil:
		c.col("result", cc.last, "a result", "no result (the call is "+string(row.State)+")")
	}
	wantErr, src := "", cc.last
	if row.State == store.CallFailed && cc.failureAt.seq > 0 {
		wantErr, src = cc.failure, cc.failureAt
	}
	c.eq("error", src, row.Error, wantErr)
}

// reconcileApprovals compares approval rows with the chain, as
// reconcileCalls does call rows.
func reconcileApprovals(out *[]Disagreement, ch *chain, apr []store.Approval, complete bool) {
	seen := make(map[string]bool, len(apr))
	for i := range apr {
		a := &apr[i]
		c := rowCheck{out, "approvals", "approval " + a.ID}
		ca := ch.approvals[a.ID]
		if ca == nil || seen[a.ID] {
			c.missing("asked for it (approval.requested or call.outcome-unknown)")
			continue
		}
		seen[a.ID] = true
		asked, d := at{ca.asked.Seq, EventKind(ca.asked.Kind)}, ca.askedD
		kind, def, args := store.KindCall, d.BindDigest, d.ArgsDigest
		if asked.kind == KindCallOutcomeUnknown {
			// Asked for a call whose outcome is unknown: the call's own
			// definition and arguments.
			kind, def, args = store.KindOutcomeUnknown, "", ""
			if d.Attempt != nil && d.Index != nil {
				if cc := ch.call(callKey{ca.asked.Step, *d.Attempt, *d.Index}); cc != nil {
					def, args = cc.firstD.DefDigest, cc.args
				}
			}
		}
		c.eq("kind", asked, string(a.Kind), string(kind))
		c.eq("step", asked, a.Step, ca.asked.Step)
		c.eq("tool", asked, recordTool(a.Tool), ca.asked.Tool)
		c.eq("def_digest", asked, a.DefDigest, def)
		c.eq("args_digest", asked, a.ArgsDigest, args)
		haveAt, haveIdx, wantAt, wantIdx := "none", "none", "none", "none"
		if a.Call != nil {
			haveAt, haveIdx = fmt.Sprint(a.Call.Attempt), fmt.Sprint(a.Call.Index)
		}
		if d.Attempt != nil && d.Index != nil {
			wantAt, wantIdx = fmt.Sprint(*d.Attempt), fmt.Sprint(*d.Index)
		}
		c.eq("call_attempt", asked, haveAt, wantAt)
		c.eq("call_idx", asked, haveIdx, wantIdx)
		if ca.uses > 1 {
			c.col("status", ca.statusAt, string(a.Status), fmt.Sprintf("%d calls ran on it", ca.uses))
		} else {
			c.eq("status", ca.statusAt, string(a.Status), string(ca.status))
		}
		src := ca.byAt
		if src.seq == 0 {
			src = asked
		}
		c.eq("decided_by", src, a.DecidedBy, ca.by)
		if ca.reasonKnown {
			c.eq("reason", ca.reasonAt, a.Reason, ca.reason)
		}
	}
	for _, id := range ch.approvalOrder {
		if complete && !seen[id] {
			ca := ch.approvals[id]
			lacks(out, "approvals", "approval "+id, at{ca.asked.Seq, EventKind(ca.asked.Kind)})
		}
	}
}

func reconcileGates(out *[]Disagreement, ch *chain, gates []store.Gate) {
	seen := make(map[attemptKey]bool, len(gates))
	for i := range gates {
		g := &gates[i]
		k := attemptKey{g.Step, g.Attempt}
		c := rowCheck{out, "gates", fmt.Sprintf("gate %q attempt %d", g.Step, g.Attempt)}
		cg := ch.gates[k]
		if cg == nil || seen[k] {
			c.missing("opened it (gate.waiting)")
			continue
		}
		seen[k] = true
		c.eq("status", cg.statusAt, string(g.Status), string(cg.status))
		c.eq("decided_by", cg.statusAt, g.DecidedBy, cg.by)
		c.eq("reason", cg.statusAt, g.Reason, cg.reason)
	}
	for _, k := range ch.gateOrder {
		if !seen[k] {
			lacks(out, "gates", fmt.Sprintf("gate %q attempt %d", k.step, k.attempt), ch.gates[k].opened)
		}
	}
}

func reconcileSteps(out *[]Disagreement, ch *chain, steps []store.Step) {
	seen := make(map[attemptKey]bool, len(steps))
	for i := range steps {
		s := &steps[i]
		k := attemptKey{s.Step, s.Attempt}
		c := rowCheck{out, "steps", fmt.Sprintf("step %q attempt %d", s.Step, s.Attempt)}
		cs := ch.steps[k]
		if cs == nil || seen[k] {
			c.missing("started it (step.started or step.retried)")
			continue
		}
		seen[k] = true
		// A gate's decision leaves its step waiting until a resume
		// follows it, done after (no record of its own).
		want := cs.status
		if cs.gate != nil && cs.status == store.StepWaiting && s.Status == store.StepDone {
			want = store.StepDone
		}
		c.eq("status", cs.statusAt, string(s.Status), string(want))
		switch {
		case cs.finished:
			c.eqDigest("output", cs.outputAt, digest(s.Output), cs.output)
		case cs.gate != nil && s.Status == store.StepDone:
			// The step's output is the gate's decision, as gateStep writes it.
			g := cs.gate
			var have gateOutput
			err := json.Unmarshal(s.Output, &have, json.RejectUnknownMembers(true))
			if want := (gateOutput{string(g.status), g.reason, g.by}); err != nil || have != want {
				c.col("output", g.statusAt, shown(string(s.Output)), fmt.Sprintf("the gate's decision %s", shown(fmt.Sprintf(`{"by":%q,"decision":%q,"reason":%q}`, g.by, g.status, g.reason))))
			}
		case s.Output != nil:
			c.col("output", cs.statusAt, "an output", "none (the step is "+string(cs.status)+")")
		}
		wantErr, src := "", cs.statusAt
		if cs.status == store.StepFailed {
			wantErr, src = cs.failure, cs.failureAt
		}
		c.eq("error", src, s.Error, wantErr)
	}
	for _, k := range ch.stepOrder {
		if !seen[k] {
			lacks(out, "steps", fmt.Sprintf("step %q attempt %d", k.step, k.attempt), ch.steps[k].started)
		}
	}
}

// gateOutput is a gate step's output: the decision followed ([Session.gateStep]).
type gateOutput struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	By       string `json:"by"`
}
