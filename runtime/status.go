package runtime

import (
	"context"

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
}

// StepStatus is one step attempt of a run.
type StepStatus struct {
	Step    string         `json:"step"`
	Attempt int            `json:"attempt"`
	Status  string         `json:"status"`
	Output  jsontext.Value `json:"output,omitempty"`
	Error   string         `json:"error,omitempty"`
}

// StatusOf returns how run r stands; with steps, its step attempts too.
func StatusOf(ctx context.Context, st *store.Store, r store.Run, steps bool) (RunStatus, error) {
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
		for _, s := range all {
			rs.Steps = append(rs.Steps, StepStatus{Step: s.Step, Attempt: s.Attempt, Status: string(s.Status), Output: s.Output, Error: s.Error})
		}
	}
	return rs, nil
}
