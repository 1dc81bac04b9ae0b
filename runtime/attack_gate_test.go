package runtime_test

import (
	"context"
	"testing"

	"github.com/openplaybook/openplaybook/runtime"
)

// The run waits at gate hold (before step act, whose tool has a side
// effect and no approval). Another process adds a steps row for act and
// points runs.current_step at it (plain SQL; no audit record touched, no
// gate row touched). Resume reconciles clean and runs act: the gate is
// skipped without a person's decision.
func TestAttackGateSkippedByCurrentStep(t *testing.T) {
	t.Parallel()
	ctr := startCtr(t, true)
	r := newRig(t, rigConfig{http: map[string]string{"ctr": ctr.URL}}, buildDoc(t, "skipgate",
		gateStep("hold", "act", ""),
		agentStep("act", "ops", []string{"mcp.ctr.hang"}, "")))
	ctx := context.Background()
	tr := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {{"mcp.ctr.hang", map[string]any{"target": "alpha"}}}})}
	out, err := r.engine(0, tr, nil, nil).Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	r.hostileWrite(`INSERT INTO steps (run, step, attempt, status, error, started_at) VALUES (?, 'act', 1, 'running', '', '2026-01-01T00:00:00.000000000Z')`, out.Run)
	r.hostileWrite(`UPDATE runs SET current_step = 'act' WHERE id = ?`, out.Run)
	if probs, err := runtime.Reconcile(ctx, r.st, out.Run); len(probs) > 0 || err != nil {
		t.Logf("Reconcile sees: %q %v", probs, err)
	}
	out2, err := r.engine(0, tr, nil, nil).Resume(ctx, out.Run)
	t.Logf("resume: %+v %v", out2, err)
	if ctr.runs("hang") != 0 {
		t.Errorf("BROKEN: step act ran past the waiting gate hold without a decision: %s", ctr)
	}
	gates, _ := r.st.Gates(ctx, out.Run)
	t.Logf("gates: %+v", gates)
	probs, _ := runtime.Reconcile(ctx, r.st, out.Run)
	t.Logf("Reconcile after (audit --verify): %q", probs)
}
