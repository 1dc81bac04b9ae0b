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
	Approval         string `json:"approval"`
	ArgsDigest       string `json:"argsDigest"`
	StoredArgsDigest string `json:"storedArgsDigest"`
	BindDigest       string `json:"bindDigest"`
	DefDigest        string `json:"defDigest"`
	SideEffecting    bool   `json:"sideEffecting"`
	Attempt          *int   `json:"attempt"`
	Index            *int   `json:"index"`
	Playbook         string `json:"playbook"`
	Version          string `json:"version"`
	DocumentDigest   string `json:"documentDigest"`
	HarnessDigest    string `json:"harnessDigest"`
	InputDigest      string `json:"inputDigest"`
	ResultDigest     string `json:"resultDigest"`
	OutputDigest     string `json:"outputDigest"`
	Code             string `json:"code"`
	Reason           string `json:"reason"`
	By               string `json:"by"`
}

func dataOf(r audit.Record) recordData {
	var d recordData
	if len(r.Data) > 0 && !d.decodePlain(r.Data) {
		var g recordData // apart from d, which stays on the stack
		_ = json.Unmarshal(r.Data, &g)
		return g
	}
	return d
}

// chainReads is what the trust checks read of a run's chain: the store
// (outside a transaction) or a write transaction ([txReads]).
type chainReads interface {
	VerifyAudit(ctx context.Context, run string) ([]audit.Problem, error)
	Audit(ctx context.Context, run string) ([]audit.Record, error)
}

// txReads reads the chain through a write transaction, so a check made
// inside it sees the transaction's own records and those of its
// batch-mates in the same commit (a read of the store sees neither).
type txReads struct{ tx store.Tx }

func (r txReads) VerifyAudit(_ context.Context, run string) ([]audit.Problem, error) {
	return r.tx.VerifyAudit(run)
}

func (r txReads) Audit(_ context.Context, run string) ([]audit.Record, error) {
	return r.tx.Audit(run)
}

// verifiedRecords returns a run's audit records once the chain verifies.
func verifiedRecords(ctx context.Context, st chainReads, run string) ([]audit.Record, error) {
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
func decided(ctx context.Context, st store.Store, run string, kind EventKind, approval, step string, attempt int) error {
	probs, err := st.VerifyAudit(ctx, run)
	if err != nil {
		return err
	}
	if len(probs) > 0 {
		return fmt.Errorf("%w: the audit chain of run %s does not verify (%s)", ErrStoreAltered, run, probs[0].Message)
	}
	// The records are searched as they are read, a page at a time.
	errFound := errors.New("found")
	err = store.EachAudit(ctx, st, run, func(r audit.Record) error {
		if r.Kind != string(kind) {
			return nil
		}
		d := dataOf(r)
		if approval != "" && d.Approval == approval {
			return errFound
		}
		if approval == "" && r.Step == step && d.Attempt != nil && *d.Attempt == attempt {
			return errFound
		}
		return nil
	})
	if err == errFound {
		return nil
	}
	if err != nil {
		return err
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
// status, its use) fails here. It is called inside the transaction that
// consumed the approval, and reads through it (tx).
func approvalRecorded(ctx context.Context, tx store.Tx, a store.Approval) error {
	st := txReads{tx}
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

// approvalAltered compares what a person is shown of, or approves by,
// approval a (its row, and the row of the call it is for) with the run's
// verified chain ch, and returns that call row (nil when a is for none)
// and the disagreements: the tool, the arguments (as stored, which is
// what is shown), their digest and the definition the approval binds,
// and the approval's own columns.
func approvalAltered(ctx context.Context, st store.Store, ch *chain, a store.Approval) (*store.Call, []Disagreement, error) {
	var out []Disagreement
	reconcileApprovals(&out, ch, []store.Approval{a}, false)
	if a.Call == nil {
		return nil, out, nil
	}
	idx := a.Call.Index
	calls, err := st.Calls(ctx, a.Run, store.CallFilter{Step: a.Call.Step, Attempt: a.Call.Attempt, Index: &idx})
	if err != nil {
		return nil, nil, err
	}
	if len(calls) != 1 {
		out = append(out, Disagreement{Table: "calls", Row: a.Call.String(), Message: fmt.Sprintf("approval %s is for %s, which the store does not have", a.ID, a.Call)})
		return nil, out, nil
	}
	reconcileCalls(&out, ch, calls, false)
	return &calls[0], out, nil
}

// verifiedChain reads a run's verified audit chain and walks it.
func verifiedChain(ctx context.Context, st store.Store, run string) (*chain, error) {
	recs, err := verifiedRecords(ctx, st, run)
	if err != nil {
		return nil, err
	}
	return readChain(recs), nil
}
