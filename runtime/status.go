package runtime

import (
	"context"
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/store"
)

// RunStatus is how a run stands, as `openplaybook status --format json`
// and the server's GET /api/v1/runs/{run} show it.
type RunStatus struct {
	Run      string `json:"run"`
	Playbook string `json:"playbook"`
	Version  string `json:"version"`
	// Status is running, waiting, completed, rejected or failed.
	Status string `json:"status"`
	// Step is the current step's id.
	Step   string `json:"step"`
	Reason string `json:"reason,omitempty"`
	// Updated is when the run last changed, RFC 3339 in UTC.
	Updated string `json:"updated"`
	// Waiting lists what the run waits for (never null).
	Waiting []Pending `json:"waiting"`
	// Steps are the step attempts, in order, when asked for.
	Steps []StepStatus `json:"steps,omitempty"`
	// Usage is what the run's model turns cost, summed over its steps;
	// with the steps only, and absent when no model turn reported usage.
	Usage *Usage `json:"usage,omitempty"`
}

// Usage is what model turns cost, in tokens, summed from the run's
// model.usage audit records ([ModelUsage]).
type Usage struct {
	// Turns is how many model turns reported usage.
	Turns int `json:"turns"`
	// InputTokens include CachedInputTokens (read from a prompt cache)
	// and CacheWriteTokens (written to one).
	InputTokens       int64 `json:"inputTokens"`
	OutputTokens      int64 `json:"outputTokens"`
	CachedInputTokens int64 `json:"cachedInputTokens"`
	CacheWriteTokens  int64 `json:"cacheWriteTokens"`
}

func (u *Usage) plus(o Usage) {
	u.Turns += o.Turns
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CachedInputTokens += o.CachedInputTokens
	u.CacheWriteTokens += o.CacheWriteTokens
}

// StepStatus is one step attempt of a run.
type StepStatus struct {
	Step    string         `json:"step"`
	Attempt int            `json:"attempt"`
	Status  string         `json:"status"`
	Output  jsontext.Value `json:"output,omitempty"`
	Error   string         `json:"error,omitempty"`
	// Usage is what the attempt's model turns cost; absent when none
	// reported usage.
	Usage *Usage `json:"usage,omitempty"`
}

// StatusOf returns how run r stands; with steps, its step attempts too.
func StatusOf(ctx context.Context, st store.Store, r store.Run, steps bool) (RunStatus, error) {
	p, err := Pendings(ctx, st, r.ID)
	if err != nil {
		return RunStatus{}, err
	}
	if p == nil {
		p = []Pending{}
	}
	rs := RunStatus{Run: r.ID, Playbook: r.PlaybookID, Version: r.PlaybookVersion, Status: string(r.Status),
		Step: r.CurrentStep, Reason: r.Reason, Updated: r.Updated.UTC().Format("2006-01-02T15:04:05Z"), Waiting: p}
	if steps {
		all, err := st.Steps(ctx, r.ID)
		if err != nil {
			return RunStatus{}, err
		}
		usage, err := usageOf(ctx, st, r.ID)
		if err != nil {
			return RunStatus{}, err
		}
		for _, s := range all {
			rs.Steps = append(rs.Steps, StepStatus{Step: s.Step, Attempt: s.Attempt, Status: string(s.Status), Output: s.Output, Error: s.Error,
				Usage: usage[stepAttempt{s.Step, s.Attempt}]})
		}
		for _, u := range usage {
			if rs.Usage == nil {
				rs.Usage = &Usage{}
			}
			rs.Usage.plus(*u)
		}
	}
	return rs, nil
}

type stepAttempt struct {
	step    string
	attempt int
}

// usageOf sums the run's model.usage records per step attempt. A record
// whose data does not decode is left out.
func usageOf(ctx context.Context, st store.Store, run string) (map[stepAttempt]*Usage, error) {
	recs, err := st.Audit(ctx, run)
	if err != nil {
		return nil, err
	}
	out := map[stepAttempt]*Usage{}
	for _, rec := range recs {
		if rec.Kind != string(KindModelUsage) {
			continue
		}
		var m ModelUsage
		if json.Unmarshal(rec.Data, &m) != nil {
			continue
		}
		k := stepAttempt{rec.Step, m.Attempt}
		if out[k] == nil {
			out[k] = &Usage{}
		}
		out[k].plus(Usage{Turns: 1, InputTokens: m.InputTokens, OutputTokens: m.OutputTokens, CachedInputTokens: m.CachedInputTokens, CacheWriteTokens: m.CacheWriteTokens})
	}
	return out, nil
}

// ListedStatus is how a run stands as a list of runs shows it
// ([store.Store.RunPage]): without its steps, and with what it waits for
// read from the gate and approval rows alone. An approval is listed by
// its ID, kind and step, without its tool and arguments: those are shown
// only by [Pendings] (the run's own status), which checks them against
// the run's audit chain first.
func ListedStatus(r store.ListedRun) RunStatus {
	rs := RunStatus{Run: r.ID, Playbook: r.PlaybookID, Version: r.PlaybookVersion, Status: string(r.Status),
		Step: r.CurrentStep, Reason: r.Reason, Updated: r.Updated.UTC().Format("2006-01-02T15:04:05Z"), Waiting: []Pending{}}
	for _, g := range r.Gates {
		rs.Waiting = append(rs.Waiting, Pending{Kind: "gate", ID: g, Step: g, Summary: fmt.Sprintf("gate %s waits for a person's decision", g)})
	}
	for _, a := range r.Approvals {
		p := Pending{Kind: string(a.Kind), ID: a.ID, Step: a.Step,
			Summary: fmt.Sprintf("a call in step %s needs approval (%s)", a.Step, a.ID)}
		if a.Kind == store.KindOutcomeUnknown {
			p.Summary = fmt.Sprintf("the outcome of a call in step %s is unknown (%s)", a.Step, a.ID)
		}
		rs.Waiting = append(rs.Waiting, p)
	}
	if len(rs.Waiting) == 0 && r.Status == store.RunWaiting {
		rs.Waiting = append(rs.Waiting, idleWait(r.Run))
	}
	return rs
}
