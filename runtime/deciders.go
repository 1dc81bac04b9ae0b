package runtime

import (
	"errors"
	"fmt"
	"slices"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/policy"
	"github.com/openplaybook/openplaybook/store"
)

// ErrNotDecider is the error of a decision by someone who may not make
// it: outside the deciders a policy rule (or serve.oidc) names, the
// person who started the run or approved one of its gates (self-approval),
// an unverified decider where a rule names deciders or asks for several
// approvers, or a person approving twice what needs distinct approvers.
// Nothing is recorded.
var ErrNotDecider = errors.New("not allowed to decide")

// deciding is what the run's verified audit log says about one decision:
// what the policy required when it was asked, who started the run, who
// approved its gates, and who already approved it (N of M).
type deciding struct {
	req           *policy.Requirement
	starter       string
	gateApprovers map[string]string // subject -> the gate they approved
	endorsers     []string
}

// deciderKinds are the kinds of record readDeciding and endorsers read;
// a caller may give them only those.
var deciderKinds = map[EventKind]bool{KindRunRequested: true, KindGateApproved: true, KindApprovalRequested: true,
	KindGateWaiting: true, KindApprovalEndorsed: true, KindGateEndorsed: true}

// readDeciding reads what [Decide] checks from the run's verified log:
// for an approval id ("apr_..."), its approval.requested record; for a
// gate (step id, attempt), its last gate.waiting.
func readDeciding(recs []audit.Record, id string, gateAttempt int) (deciding, error) {
	dc := deciding{gateApprovers: map[string]string{}}
	for _, r := range recs {
		switch EventKind(r.Kind) {
		case KindRunRequested:
			var ev RunRequested
			if err := json.Unmarshal(r.Data, &ev); err != nil {
				return dc, fmt.Errorf("the run's run.requested record does not read: %v", err)
			}
			dc.starter = ev.By
		case KindGateApproved:
			var ev GateApproved
			if err := json.Unmarshal(r.Data, &ev); err != nil {
				return dc, fmt.Errorf("a gate.approved record does not read: %v", err)
			}
			dc.gateApprovers[ev.By] = r.Step
			// A gate that needed several people was approved by each.
			for _, by := range ev.Approvers {
				dc.gateApprovers[by] = r.Step
			}
		case KindApprovalRequested:
			var ev ApprovalRequested
			if err := json.Unmarshal(r.Data, &ev); err != nil {
				return dc, fmt.Errorf("an approval.requested record does not read: %v", err)
			}
			if ev.Approval == id {
				dc.req = ev.Policy
			}
		case KindGateWaiting:
			var ev GateWaiting
			if err := json.Unmarshal(r.Data, &ev); err != nil {
				return dc, fmt.Errorf("a gate.waiting record does not read: %v", err)
			}
			if r.Step == id && ev.Attempt == gateAttempt {
				dc.req = ev.Policy
			}
		}
	}
	dc.endorsers = endorsers(recs, id, gateAttempt)
	return dc, nil
}

// endorsers returns, in order and once each, who approved the approval
// id, or the gate id's attempt, so far (records approval.endorsed,
// gate.endorsed).
func endorsers(recs []audit.Record, id string, gateAttempt int) []string {
	var out []string
	for _, r := range recs {
		var by string
		switch EventKind(r.Kind) {
		case KindApprovalEndorsed:
			var ev ApprovalEndorsed
			if json.Unmarshal(r.Data, &ev) != nil || ev.Approval != id {
				continue
			}
			by = ev.By
		case KindGateEndorsed:
			var ev GateEndorsed
			if json.Unmarshal(r.Data, &ev) != nil || r.Step != id || ev.Attempt != gateAttempt {
				continue
			}
			by = ev.By
		default:
			continue
		}
		if !slices.Contains(out, by) {
			out = append(out, by)
		}
	}
	return out
}

// check says why v's decider may not decide (an error wrapping
// [ErrNotDecider]), or nil. what names the decision ("approval apr_x",
// "gate review"); call is true for a call's approval.
func (dc deciding) check(v Verdict, runID, what string, call bool) error {
	req := dc.req
	if req != nil && req.Refused != "" && v.Approve {
		return fmt.Errorf("%w: %s; a policy that fails to evaluate refuses, so %s can only be rejected", ErrNotDecider, req.Refused, what)
	}
	if !v.Verified {
		if req != nil && (len(req.Deciders) > 0 || req.Needed() > 1) {
			return fmt.Errorf("%w: policy rule %q names who decides %s (or how many); only a verified person decides it (the console or API of serve with serve.oidc)", ErrNotDecider, req.Rules[0], what)
		}
		return nil
	}
	if why := req.Refuses(v.By, v.Groups); why != "" {
		return fmt.Errorf("%w: %s", ErrNotDecider, why)
	}
	self := v.SelfApproval
	if req != nil {
		self = req.SelfApproval
	}
	if self {
		return nil
	}
	if dc.starter != "" && dc.starter == v.By {
		return fmt.Errorf("%w: %s started run %s and may not decide its gates and approvals (self-approval; serve.oidc.selfApproval or a policy rule's selfApproval allows it)", ErrNotDecider, v.By, runID)
	}
	if gate, ok := dc.gateApprovers[v.By]; ok && call {
		return fmt.Errorf("%w: %s approved gate %s of run %s and may not also approve its calls (self-approval; a policy rule's selfApproval allows it)", ErrNotDecider, v.By, gate, runID)
	}
	return nil
}

// endorsement is v's approval as an [Endorsement] (its Count as read
// before the decision: the store's count is what [endorse] returns).
func (dc deciding) endorsement(v Verdict, rules []string, needed int) Endorsement {
	return Endorsement{By: v.By, ByName: v.ByName, ByEmail: v.ByEmail, Reason: v.Reason, Rules: rules, Count: len(dc.endorsers) + 1, Needed: needed}
}

// endorse records one approval of what needs several (req.Needed() > 1)
// in tx: the endorsement record first (which takes the run's chain, so a
// concurrent one is seen), then the count of distinct approvers; the
// same person twice is refused (nothing is recorded). It returns who
// approved so far, this one included, and whether that is enough.
func endorse(tx store.Tx, runID, step, tool string, ev Event, id string, gateAttempt int, by string, needed int) ([]string, bool, error) {
	if _, err := tx.Append(newRecord(identity, runID, step, tool, ev)); err != nil {
		return nil, false, err
	}
	recs, err := tx.Audit(runID)
	if err != nil {
		return nil, false, err
	}
	n := 0
	for _, r := range recs {
		switch EventKind(r.Kind) {
		case KindApprovalEndorsed:
			var e ApprovalEndorsed
			if json.Unmarshal(r.Data, &e) == nil && e.Approval == id && e.By == by {
				n++
			}
		case KindGateEndorsed:
			var e GateEndorsed
			if json.Unmarshal(r.Data, &e) == nil && r.Step == id && e.Attempt == gateAttempt && e.By == by {
				n++
			}
		}
	}
	if n > 1 {
		return nil, false, approvedTwice(by, id, needed)
	}
	who := endorsers(recs, id, gateAttempt)
	return who, len(who) >= needed, nil
}

// approvedTwice is the refusal of a second approval by by of id, which
// needs needed distinct people.
func approvedTwice(by, id string, needed int) error {
	return fmt.Errorf("%w: %s already approved %s; it needs %d distinct people", ErrNotDecider, by, id, needed)
}
