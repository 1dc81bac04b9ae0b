package runtime_test

import (
	"context"
	"errors"
	"testing"

	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// TestResumeRefusesARunHeldElsewhere: while another process (here: a lock
// the test holds) executes a run, resume fails before it touches a call,
// so two resumes can never both run a side-effecting call.
func TestResumeRefusesARunHeldElsewhere(t *testing.T) {
	t.Parallel()
	r := newApprovalsRig(t)
	ctx := context.Background()
	tr := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {
		{"mcp.ctr.launch", map[string]any{"target": "once"}},
	}})}
	out, err := r.engine(0, tr, nil, nil).Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	run := out.Run
	r.mustDecide(run, r.onlyApproval(run).ID, true)

	unlock, err := r.st.LockRun(run)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.engine(0, tr, nil, nil).Resume(ctx, run)
	if !errors.Is(err, store.ErrRunBusy) {
		t.Fatalf("resume of a held run: %v, want store.ErrRunBusy", err)
	}
	if n := r.ctr.runs("launch"); n != 0 {
		t.Fatalf("launch ran %d times while the run was held elsewhere", n)
	}
	unlock()
	out, err = r.engine(0, tr, nil, nil).Resume(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.ctr.runs("launch"); n != 1 {
		t.Fatalf("launch ran %d times after the lock was released, want 1 (%s)", n, out.Status)
	}
}
