package runtime_test

import (
	"context"
	"errors"
	"testing"

	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/replica"
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

// TestCreateClaimsForItsReplica: a run created through a replica's view
// of the store (store/replica.Owned) is owned by that replica from the
// commit that creates it, before anything executes it: a replica that
// dies between answering a start and executing the run leaves it to be
// adopted (adoption takes runs under a dead owner), not running under no
// one. Its execution claims it again; a run created through the store
// itself (one process, the CLI) has no owner.
func TestCreateClaimsForItsReplica(t *testing.T) {
	t.Parallel()
	doc := buildDoc(t, "claimed", gateStep("hold", "", ""))
	r := newRig(t, rigConfig{}, doc)
	ctx := context.Background()
	owned := func(o *runtime.SessionOptions) { o.Store = replica.Owned(r.st, "rep_0123456789abcdef", nil) }
	sess := r.engine(0, nil, nil, owned)
	run, err := sess.Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.st.GetRun(ctx, run)
	if err != nil || got.Owner != "rep_0123456789abcdef" || got.OwnerEpoch != 1 {
		t.Fatalf("the created run is owned by %q at epoch %d (%v), want the creating replica at 1", got.Owner, got.OwnerEpoch, err)
	}
	out, err := sess.Resume(ctx, run)
	wantOutcome(t, "resume", out, err, runtime.Waiting)
	if got, err = r.st.GetRun(ctx, run); err != nil || got.Owner != "rep_0123456789abcdef" || got.OwnerEpoch != 2 {
		t.Fatalf("the executed run is owned by %q at epoch %d (%v), want the replica at 2", got.Owner, got.OwnerEpoch, err)
	}
	plain, err := r.engine(0, nil, nil, nil).Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = r.st.GetRun(ctx, plain); err != nil || got.Owner != "" || got.OwnerEpoch != 0 {
		t.Fatalf("a run created through the store itself is owned by %q at epoch %d (%v), want no owner", got.Owner, got.OwnerEpoch, err)
	}
}
