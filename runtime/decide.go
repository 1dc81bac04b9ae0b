package runtime

import (
	"context"
	"fmt"
	"strings"

	"github.com/openplaybook/openplaybook/store"
)

// Verdict is a person's decision on a gate or an approval request.
type Verdict struct {
	// Approve is true to approve (a gate follows its next; a call runs
	// once; an outcome-unknown call runs again), false to deny.
	Approve bool
	// Reason says why; By says who. Both are recorded in the audit log
	// as given: redact secret values before (the CLI does).
	Reason, By string
	// ByName and ByEmail, when By is a verified person's subject, are
	// their name and e-mail claims, recorded beside By.
	ByName, ByEmail string
	// Verified is true when By is a subject an issuer verified (serve
	// with serve.oidc), Groups then their groups. Only a verified person
	// decides what a policy rule names deciders for or asks several
	// approvers of, and only then are self-approval and distinct
	// approvers checked (docs/policy.md).
	Verified bool
	Groups   []string
	// SelfApproval lets the person who started the run, or approved one
	// of its gates, decide what no policy rule is about
	// (serve.oidc.selfApproval); a rule's own selfApproval decides for
	// what it asks.
	SelfApproval bool
}

// Decided says what [Decide] decided: Kind is "gate" or "approval", ID
// the gate's step id or the approval id.
type Decided struct {
	Kind, ID string
	// Approvals and Needed, for a decision that needs several distinct
	// approvers (a policy rule's approvals), are how many approved so far
	// and how many must: while Approvals < Needed, the approval was
	// recorded (approval.endorsed, gate.endorsed) and the gate or call
	// still waits. Both 0 otherwise.
	Approvals, Needed int
}

func (d Decided) String() string { return d.Kind + " " + d.ID }

// Decide records a person's verdict on what a run waits for: id is a
// waiting gate's step id, or an approval id ("apr_..."; see [Pendings]).
// The decision and its audit record (gate.approved, gate.rejected,
// approval.approved, approval.denied) are one transaction. It takes effect
// when the run is resumed. A run that has ended, a gate already decided,
// an approval of another run, and an id the run does not wait for are
// errors that say so; store errors are returned as they are.
//
// Every caller (the CLI, a console, a test) decides through Decide.
func Decide(ctx context.Context, st store.Store, runID, id string, v Verdict) (Decided, error) {
	t, err := awaited(ctx, st, runID, id)
	if err != nil {
		return Decided{}, err
	}
	dc := t.dc
	if err := dc.check(v, runID, t.what, t.gate == nil); err != nil {
		return Decided{}, err
	}
	var rules []string
	if dc.req != nil {
		rules = dc.req.Rules
	}
	var count, need int
	if t.gate == nil {
		if v.Approve {
			if err := approvable(ctx, st, runID, id); err != nil {
				return Decided{}, err
			}
		}
		err = st.Tx(ctx, func(tx store.Tx) error {
			var approvers []string
			if needed := dc.req.Needed(); v.Approve && needed > 1 {
				a, err := tx.Approval(id)
				if err != nil {
					return err
				}
				if a.Run != runID {
					return fmt.Errorf("approval %s belongs to run %s, not %s", id, a.Run, runID)
				}
				if a.Status != store.ApprovalPending {
					_, err := tx.DecideApproval(id, v.Approve, v.Reason, v.By) // says why it cannot be
					return err
				}
				ev := ApprovalEndorsed{Approval: id, Endorsement: dc.endorsement(v, rules, needed)}
				who, enough, err := endorse(tx, runID, a.Step, a.Tool, ev, id, 0, v.By, needed)
				count, need = len(who), needed
				if err != nil || !enough {
					return err
				}
				approvers = who
			}
			a, err := tx.DecideApproval(id, v.Approve, v.Reason, v.By)
			if err != nil {
				return err
			}
			if a.Run != runID {
				return fmt.Errorf("approval %s belongs to run %s, not %s", id, a.Run, runID)
			}
			ev := ApprovalApproved{Approval: id, By: v.By, Reason: v.Reason, ApprovalKind: string(a.Kind), ByName: v.ByName, ByEmail: v.ByEmail, Rules: rules, Approvers: approvers}
			var e Event = ev
			if !v.Approve {
				e = ApprovalDenied(ev)
			}
			_, err = tx.Append(newRecord(identity, runID, a.Step, a.Tool, e))
			return err
		})
		return Decided{Kind: "approval", ID: id, Approvals: count, Needed: need}, err
	}
	g := *t.gate
	err = st.Tx(ctx, func(tx store.Tx) error {
		var approvers []string
		if needed := dc.req.Needed(); v.Approve && needed > 1 {
			ev := GateEndorsed{Attempt: g.Attempt, Endorsement: dc.endorsement(v, rules, needed)}
			who, enough, err := endorse(tx, runID, id, "", ev, id, g.Attempt, v.By, needed)
			count, need = len(who), needed
			if err != nil || !enough {
				return err
			}
			approvers = who
		}
		if _, err := tx.DecideGate(runID, id, g.Attempt, v.Approve, v.Reason, v.By); err != nil {
			return err
		}
		ev := GateApproved{Attempt: g.Attempt, By: v.By, Reason: v.Reason, ByName: v.ByName, ByEmail: v.ByEmail, Rules: rules, Approvers: approvers}
		var e Event = ev
		if !v.Approve {
			e = GateRejected(ev)
		}
		_, err := tx.Append(newRecord(identity, runID, id, "", e))
		return err
	})
	return Decided{Kind: "gate", ID: id, Approvals: count, Needed: need}, err
}

// decision is one decision a run waits for, as [Decide] and [MayDecide]
// find it: what its verified audit log says of who decides it, what it
// is called in messages ("approval apr_x", "gate review"), and for a gate
// its waiting attempt (nil for an approval).
type decision struct {
	dc   deciding
	what string
	gate *store.Gate
}

// awaited finds the decision id of run runID: an error when the run
// has ended or its chain does not verify; for a gate (step id), when it
// has no waiting attempt. An approval id ("apr_...") is read from the
// log only: whether the store has it pending is checked when it is
// decided.
func awaited(ctx context.Context, st store.Store, runID, id string) (decision, error) {
	run, err := st.GetRun(ctx, runID)
	if err != nil {
		return decision{}, fmt.Errorf("run %s: %w", runID, err)
	}
	if run.Status.Ended() {
		return decision{}, fmt.Errorf("run %s has ended (%s); there is nothing to decide", runID, run.Status)
	}
	recs, err := verifiedRecords(ctx, st, runID)
	if err != nil {
		return decision{}, fmt.Errorf("run %s: %w; nothing was decided", runID, err)
	}
	if strings.HasPrefix(id, "apr_") {
		dc, err := readDeciding(recs, id, 0)
		if err != nil {
			return decision{}, fmt.Errorf("run %s: %w; nothing was decided", runID, err)
		}
		return decision{dc: dc, what: "approval " + id}, nil
	}
	gates, err := st.Gates(ctx, runID)
	if err != nil {
		return decision{}, err
	}
	for _, g := range gates {
		if g.Step == id && g.Status == store.GateWaiting {
			dc, err := readDeciding(recs, id, g.Attempt)
			if err != nil {
				return decision{}, fmt.Errorf("run %s: %w; nothing was decided", runID, err)
			}
			return decision{dc: dc, what: "gate " + id, gate: &g}, nil
		}
	}
	for _, g := range gates {
		if g.Step == id {
			return decision{}, fmt.Errorf("gate %s of run %s was already decided (%s by %s); only a waiting gate can be decided", id, runID, g.Status, g.DecidedBy)
		}
	}
	return decision{}, fmt.Errorf("run %s has no waiting gate or approval %q; 'openplaybook status --harness FILE %s' lists what it waits for", runID, id, runID)
}

func identity(s string) string { return s }

// approvable checks, before a person's approval is recorded, that what
// they were shown of it (the call's tool and stored arguments, and the
// approval's own columns) is what the run's verified chain recorded: a
// row another process edited is refused with [ErrStoreAltered], and
// nothing is recorded. An approval the run does not have is left to
// [store.Tx.DecideApproval] to refuse.
func approvable(ctx context.Context, st store.Store, runID, id string) error {
	// The approval's row is read after the run's head and before the
	// chain: a decision that commits in between (its row and its record
	// are one transaction) moves the head, so when they disagree and the
	// head moved they are read again, and a concurrent decision is never
	// taken for an edited row.
	const tries = 8
	for i := 0; ; i++ {
		before, _, err := st.AuditHead(ctx, runID)
		if err != nil {
			return err
		}
		a, err := st.GetApproval(ctx, id)
		if err != nil || a.Run != runID {
			return nil // none, or gone meanwhile: DecideApproval says so
		}
		ch, err := verifiedChain(ctx, st, runID)
		if err != nil {
			return fmt.Errorf("run %s: %w; approval %s was not approved", runID, err, id)
		}
		_, ds, err := approvalAltered(ctx, st, ch, a)
		if err != nil || len(ds) == 0 {
			return err
		}
		after, _, err := st.AuditHead(ctx, runID)
		if err != nil {
			return err
		}
		if after == before || i == tries-1 {
			return fmt.Errorf("run %s: %w: %s (%d problems; `openplaybook audit --verify` lists them); approval %s was not approved", runID, ErrStoreAltered, ds[0].Message, len(ds), id)
		}
	}
}
