package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/policy"
	"github.com/openplaybook/openplaybook/store"
)

// Pending is one decision a run waits for.
type Pending struct {
	// Kind is "gate", "call" (a tool-call approval), "outcome_unknown",
	// "agent" (the step waits for its external agent to connect) or
	// "resume" (nothing is left to decide; resume the run).
	Kind string `json:"kind"`
	// ID is what [Decide] and `openplaybook approve RUN ID` take: the
	// gate's step id or the approval id.
	ID   string `json:"id"`
	Step string `json:"step"`
	Tool string `json:"tool,omitempty"`
	// Arguments are the arguments of the call to approve (canonical JSON,
	// secrets redacted), so a person sees exactly what runs.
	Arguments jsontext.Value `json:"arguments,omitempty"`
	// Summary says what is to be decided.
	Summary string `json:"summary"`
	// Altered, when set, says how the store's rows of this decision (the
	// approval, its call's tool or arguments) disagree with the run's
	// audit chain: Tool and Arguments are then withheld, since they are
	// not what was recorded, and [Decide] refuses to approve it.
	Altered string `json:"altered,omitempty"`
	// Policy, when harness policy rules asked who decides this gate or
	// approval, is what they require and who approved so far (N of M).
	Policy *PendingPolicy `json:"policy,omitempty"`
	// AgentText is, for a call, the agent's own words before it as its
	// approval.requested record holds them ([ApprovalRequested].AgentText:
	// redacted, at most 2 KiB and a note); absent when it wrote none or
	// when Altered is set. The model's claim, checked by nothing.
	AgentText string `json:"agentText,omitempty"`
}

// PendingPolicy is what the policy requires of a decision still open.
type PendingPolicy struct {
	policy.Requirement
	// Approved are the distinct people who approved so far.
	Approved []string `json:"approved"`
}

// waitingOutcome lists what a waiting run waits for.
func (s *Session) waitingOutcome(ctx context.Context, runID string) (Outcome, error) {
	out := Outcome{Status: Waiting}
	pend, err := Pendings(ctx, s.opt.Store, runID)
	if err != nil {
		return out, err
	}
	out.Waiting = pend
	var parts []string
	for _, p := range pend {
		parts = append(parts, p.Summary)
		s.progress("waiting: %s (%s)", p.Summary, p.ID)
	}
	out.Reason = strings.Join(parts, "; ")
	return out, nil
}

// Pendings lists what a run waits for: open gates and pending approvals,
// each with the exact arguments of the call to decide.
//
// An approval whose rows disagree with the run's verified chain is listed
// with Altered set and without its tool and arguments. The rows are read
// after the chain; when one disagrees and the run's audit head moved
// meanwhile (the run executes elsewhere), the list is read again, so that
// a run that moved on is not taken for an altered one.
func Pendings(ctx context.Context, s store.Store, runID string) ([]Pending, error) {
	const tries = 8
	for i := 0; ; i++ {
		before, _, err := s.AuditHead(ctx, runID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		out, altered, err := pendingsOnce(ctx, s, runID)
		if err != nil || !altered || i == tries-1 {
			return out, err
		}
		if after, _, err := s.AuditHead(ctx, runID); err != nil || after == before {
			return out, err
		}
	}
}

// pendingsOnce is one reading of Pendings; altered says whether an
// approval was found altered.
func pendingsOnce(ctx context.Context, s store.Store, runID string) (out []Pending, anyAltered bool, err error) {
	gates, err := s.Gates(ctx, runID)
	if err != nil {
		return nil, false, err
	}
	for _, g := range gates {
		if g.Status == store.GateWaiting {
			out = append(out, Pending{Kind: "gate", ID: g.Step, Step: g.Step, Summary: fmt.Sprintf("gate %s waits for a person's decision", g.Step)})
		}
	}
	apr, err := s.PendingApprovals(ctx, runID)
	if err != nil {
		return nil, false, err
	}
	// What a person is shown of an approval is what the chain recorded:
	// the log is read and walked once for all of them.
	var ch *chain
	var chainErr error
	if len(apr) > 0 {
		if ch, chainErr = verifiedChain(ctx, s, runID); chainErr != nil && !errors.Is(chainErr, ErrStoreAltered) {
			return nil, false, chainErr
		}
	}
	for _, a := range apr {
		p := Pending{Kind: string(a.Kind), ID: a.ID, Step: a.Step, Tool: a.Tool}
		altered := ""
		if chainErr != nil {
			altered = chainErr.Error()
		} else if call, ds, err := approvalAltered(ctx, s, ch, a); err != nil {
			return nil, false, err
		} else if len(ds) > 0 {
			altered = ds[0].Message
		} else if call != nil {
			// The arguments shown are those just compared with the chain.
			p.Arguments = call.Args
			p.AgentText = ch.agentText(a.ID)
		}
		if altered != "" {
			anyAltered = true
			out = append(out, Pending{Kind: string(a.Kind), ID: a.ID, Step: a.Step, Altered: altered,
				Summary: fmt.Sprintf("approval %s of step %s cannot be approved: the store was altered (%s); `openplaybook audit --verify %s` lists what changed", a.ID, a.Step, altered, runID)})
			continue
		}
		if a.Kind == store.KindOutcomeUnknown {
			p.Summary = fmt.Sprintf("the outcome of call %s in step %s is unknown: approve to run it again, deny to leave it", quote(a.Tool), a.Step)
		} else {
			p.Summary = fmt.Sprintf("call %s in step %s needs approval", quote(a.Tool), a.Step)
			if a.Reason == ReasonResumedSameTool {
				p.Summary = fmt.Sprintf("call %s in step %s needs approval: the step was resumed, and this call matches none it made before, but a call to %s already ran; approve it only if it is not the same action again", quote(a.Tool), a.Step, quote(a.Tool))
			}
		}
		out = append(out, p)
	}
	if len(out) > 0 {
		if err := pendingPolicies(ctx, s, runID, out, gates); err != nil {
			return nil, false, err
		}
	}
	if len(out) == 0 {
		if run, err := s.GetRun(ctx, runID); err == nil && run.Status == store.RunWaiting {
			out = append(out, idleWait(run))
		}
	}
	return out, anyAltered, nil
}

// idleWait is what waiting run r waits for when no gate or approval is
// open: its external agent, or a resume.
func idleWait(r store.Run) Pending {
	if r.Reason == AgentWaitReason(r.CurrentStep) {
		return Pending{Kind: "agent", ID: r.ID, Step: r.CurrentStep,
			Summary: fmt.Sprintf("step %s waits for its agent: connect an MCP client to the run (docs/serve.md)", r.CurrentStep)}
	}
	return Pending{Kind: "resume", ID: r.ID, Step: r.CurrentStep,
		Summary: "nothing is left to decide (an approval request expired or was decided): resume the run"}
}

// pendingPolicies sets the Policy of the pendings the run's audit log
// records a policy requirement for, and says it in their Summary.
func pendingPolicies(ctx context.Context, s store.Store, runID string, out []Pending, gates []store.Gate) error {
	if !slices.ContainsFunc(out, func(p Pending) bool {
		return p.Altered == "" && (p.Kind == "gate" || p.Kind == string(store.KindCall))
	}) {
		return nil // nothing a policy can ask of: the log is not read
	}
	// Only the records readDeciding reads are kept, as the log streams by
	// a page at a time.
	var recs []audit.Record
	err := store.EachAudit(ctx, s, runID, func(r audit.Record) error {
		if deciderKinds[EventKind(r.Kind)] {
			recs = append(recs, r)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := range out {
		p := &out[i]
		if p.Altered != "" || (p.Kind != "gate" && p.Kind != string(store.KindCall)) {
			continue
		}
		attempt := 0
		if p.Kind == "gate" {
			for _, g := range gates {
				if g.Step == p.ID && g.Status == store.GateWaiting {
					attempt = g.Attempt
				}
			}
		}
		dc, err := readDeciding(recs, p.ID, attempt)
		if err != nil || dc.req == nil {
			continue
		}
		p.Policy = &PendingPolicy{Requirement: *dc.req, Approved: dc.endorsers}
		if p.Policy.Approved == nil {
			p.Policy.Approved = []string{}
		}
		p.Summary += "; " + dc.req.Describe(dc.endorsers)
	}
	return nil
}

// agentText is the agentText of approval id's approval.requested record
// in the chain ("" when it has none, or the approval was not asked so).
func (c *chain) agentText(id string) string {
	a := c.approvals[id]
	if a == nil || EventKind(a.asked.Kind) != KindApprovalRequested {
		return ""
	}
	var ar ApprovalRequested
	if json.Unmarshal(a.asked.Data, &ar) != nil {
		return ""
	}
	return ar.AgentText
}
