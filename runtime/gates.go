package runtime

import (
	"context"
	"fmt"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/policy"
	"github.com/openplaybook/openplaybook/store"
)

// gateStep opens a gate, or follows a person's decision on it. status is
// the attempt's: done when the decision was followed before (the process
// stopped before the next step started).
func (s *Session) gateStep(ctx context.Context, runID string, si *stepInfo, attempt int, status store.StepStatus, ls *loopState) (next string, out Outcome, done bool, err error) {
	stepID := playbook.Str(si.step.ID)
	gates, err := s.opt.Store.Gates(ctx, runID)
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
		req, err := s.gatePolicy(ctx, runID, stepID)
		if err != nil {
			return "", Outcome{}, true, err
		}
		err = s.opt.Store.Tx(ctx, func(tx store.Tx) error {
			if _, err := tx.OpenGate(runID, stepID, attempt); err != nil {
				return err
			}
			if err := tx.SetStepWaiting(runID, stepID, attempt); err != nil {
				return err
			}
			if err := tx.SetRunStatus(runID, store.RunWaiting, "gate "+stepID+" waits for a person's decision"); err != nil {
				return err
			}
			return s.append(tx, runID, stepID, "", GateWaiting{Attempt: attempt, Purpose: playbook.Str(si.step.Purpose), Policy: req})
		})
		if err != nil {
			return "", Outcome{}, true, err
		}
		o, err := s.waitingOutcome(ctx, runID)
		return "", o, true, err
	}
	switch g.Status {
	case store.GateWaiting:
		if err := s.opt.Store.Tx(ctx, func(tx store.Tx) error {
			return tx.SetRunStatus(runID, store.RunWaiting, "gate "+stepID+" waits for a person's decision")
		}); err != nil {
			return "", Outcome{}, true, err
		}
		o, err := s.waitingOutcome(ctx, runID)
		return "", o, true, err
	case store.GateApproved:
		next = playbook.Str(si.step.Next)
	case store.GateRejected:
		next = playbook.Str(si.step.OnReject)
	}
	kind := map[store.GateStatus]EventKind{store.GateApproved: KindGateApproved, store.GateRejected: KindGateRejected}[g.Status]
	if err := decided(ctx, s.opt.Store, runID, kind, "", stepID, attempt); err != nil {
		return "", Outcome{Run: runID}, true, err
	}
	if status != store.StepDone {
		decision, _ := json.Marshal(map[string]any{"decision": string(g.Status), "reason": g.Reason, "by": g.DecidedBy})
		err = s.opt.Store.Tx(ctx, func(tx store.Tx) error {
			return tx.FinishStep(runID, stepID, attempt, store.StepDone, decision, "")
		})
		if err != nil {
			return "", Outcome{}, true, err
		}
		ls.finished(stepID, decision)
	}
	s.progress("gate %s %s", stepID, g.Status)
	if g.Status == store.GateRejected && next == "" {
		reason := fmt.Sprintf("gate %s rejected", stepID)
		if g.Reason != "" {
			reason += ": " + g.Reason
		}
		err := s.opt.Store.Tx(ctx, func(tx store.Tx) error {
			if err := tx.SetRunStatus(runID, store.RunRejected, s.opt.Redact(reason)); err != nil {
				return err
			}
			return s.append(tx, runID, stepID, "", RunRejected{Reason: s.opt.Redact(reason)})
		})
		s.progress("run %s rejected at gate %s", runID, stepID)
		return "", Outcome{Status: Rejected, Reason: reason}, true, err
	}
	return next, Outcome{}, false, nil
}

// gatePolicy is what the harness policy's gate rules require of who
// decides gate step (nil: no rule is about it). A rule whose condition
// fails to evaluate gives a requirement no one meets, so the gate can
// only be rejected.
func (s *Session) gatePolicy(ctx context.Context, runID, step string) (*policy.Requirement, error) {
	pol := s.opt.Policy
	if pol.Len() == 0 || len(pol.GateRules(step)) == 0 {
		return nil, nil
	}
	run, err := s.opt.Store.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	req, err := pol.EvaluateGate(policy.Gate{Step: step, Input: run.Input})
	if err != nil {
		var rules []string
		for _, m := range pol.GateRules(step) {
			rules = append(rules, m.Rule)
		}
		return &policy.Requirement{Rules: rules, Approvals: 1, Refused: s.opt.Redact(err.Error())}, nil
	}
	return req, nil
}
