package runtime_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// errDiskFull is the injected commit failure.
var errDiskFull = errors.New("database or disk is full (injected)")

// storeFaultRig runs a step whose one call is side-effecting (the ctr
// server's hang tool, answering at once); right after the server ran it,
// before the runtime recorded its outcome, the store starts failing its
// commits, as a full disk would: fails says how many (negative: until
// the test frees it with free). The server's handler count is the side
// effect.
type storeFaultRig struct {
	*rig
	ctr   *ctrServer
	tr    map[string]string
	fails atomic.Int64
}

func newStoreFaultRig(t *testing.T, fails int64) *storeFaultRig {
	t.Helper()
	ctr := startCtr(t, true)
	doc := buildDoc(t, "diskfull", agentStep("act", "ops", []string{"mcp.ctr.hang", "note.add"}, ""))
	f := &storeFaultRig{rig: newRig(t, rigConfig{http: map[string]string{"ctr": ctr.URL}}, doc), ctr: ctr,
		tr: map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {{"mcp.ctr.hang", map[string]any{"target": "alpha"}}}})}}
	var armed atomic.Bool
	ctr.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "tools/call" && !armed.Swap(true) {
				f.fails.Store(fails) // the call ran; its answer is on its way
			}
			return res, err
		}
	})
	f.sqlite().SetCommitFault(func() error {
		switch n := f.fails.Load(); {
		case n < 0:
			return errDiskFull
		case n > 0:
			f.fails.Add(-1)
			return errDiskFull
		}
		return nil
	})
	return f
}

func (f *storeFaultRig) free() { f.fails.Store(0) }

func (f *storeFaultRig) session() *runtime.Session { return f.engine(0, f.tr, nil, nil) }

// TestStoreFailsAfterSend: the store fails (disk full) between a
// side-effecting call's send and the record of its outcome. Whatever
// command comes next (resume, retry, retry --force), the call is not
// sent again without a person's decision; approved, it runs once more;
// denied, never.
func TestStoreFailsAfterSend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// One commit fails (the outcome's): the step, then the run, are
	// recorded failed, with the call started.
	failedRun := func(t *testing.T) (*storeFaultRig, string) {
		f := newStoreFaultRig(t, 1)
		out, err := f.session().Start(ctx, nil)
		if out.Status != runtime.Failed || f.ctr.runs("hang") != 1 {
			t.Fatalf("start: %+v %v, server %s; want failed after one run of hang", out, err, f.ctr)
		}
		if rows := f.calls(out.Run); len(rows) != 1 || rows[0].State != store.CallStarted {
			t.Fatalf("calls %+v, want the hang call started (its outcome was never recorded)", rows)
		}
		// Resume leaves a failed run as it is; a plain retry refuses a
		// failure to record (not transient).
		if res, err := f.session().Resume(ctx, out.Run); err != nil || res.Status != runtime.Failed {
			t.Fatalf("resume: %+v %v", res, err)
		}
		if _, err := f.session().Retry(ctx, out.Run, runtime.RetryOptions{By: "t"}); !errors.Is(err, runtime.ErrNotRetryable) {
			t.Fatalf("retry: %v, want it refused", err)
		}
		// Forced: the new attempt asks the call again, and waits for a
		// person's decision on it instead of sending it.
		res, err := f.session().Retry(ctx, out.Run, runtime.RetryOptions{By: "t", Force: true})
		if n := f.ctr.runs("hang"); n != 1 {
			t.Fatalf("retry --force sent the call again without a person's decision: hang ran %d times (outcome %+v)", n, res)
		}
		wantOutcome(t, "retry --force with the call's outcome unknown", res, err, runtime.Waiting)
		if len(res.Waiting) != 1 || res.Waiting[0].Kind != string(store.KindOutcomeUnknown) || res.Waiting[0].Tool != "mcp.ctr.hang" {
			t.Fatalf("the retried run waits for %+v, want one outcome-unknown decision on the call", res.Waiting)
		}
		if res, err := f.session().Resume(ctx, out.Run); err != nil || res.Status != runtime.Waiting {
			t.Fatalf("resume without a decision: %+v %v", res, err)
		}
		if n := f.ctr.runs("hang"); n != 1 {
			t.Fatalf("hang ran %d times without a person's decision", n)
		}
		return f, out.Run
	}

	t.Run("retry-denied", func(t *testing.T) {
		t.Parallel()
		f, run := failedRun(t)
		f.mustDecide(run, f.pending(run)[0].ID, false)
		res, err := f.session().Resume(ctx, run)
		wantOutcome(t, "resume after the denial", res, err, runtime.Completed)
		if n := f.ctr.runs("hang"); n != 1 {
			t.Fatalf("hang ran %d times; a person denied running it again", n)
		}
		if probs, err := runtime.Reconcile(ctx, f.st, run); err != nil || len(probs) > 0 {
			t.Fatalf("reconcile: %v %v", probs, err)
		}
	})

	t.Run("retry-approved", func(t *testing.T) {
		t.Parallel()
		f, run := failedRun(t)
		f.mustDecide(run, f.pending(run)[0].ID, true)
		res, err := f.session().Resume(ctx, run)
		wantOutcome(t, "resume after the approval", res, err, runtime.Completed)
		if n := f.ctr.runs("hang"); n != 2 {
			t.Fatalf("hang ran %d times, want 2 (once, and once more as approved)", n)
		}
		// Once more: nothing runs.
		if _, err := f.session().Retry(ctx, run, runtime.RetryOptions{By: "t", Force: true}); !errors.Is(err, runtime.ErrNotRetryable) {
			t.Fatalf("retry of a completed run: %v", err)
		}
		if res, err := f.session().Resume(ctx, run); err != nil || res.Status != runtime.Completed {
			t.Fatalf("resume of the completed run: %+v %v", res, err)
		}
		if probs, err := runtime.Reconcile(ctx, f.st, run); err != nil || len(probs) > 0 {
			t.Fatalf("reconcile: %v %v", probs, err)
		}
		if n := f.ctr.runs("hang"); n != 2 {
			t.Fatalf("hang ran %d times, want 2", n)
		}
	})

	// The retried attempt's agent goes on without asking the call again:
	// the step still does not end before a person decided it; approved,
	// it runs once more.
	t.Run("retry-not-asked-again", func(t *testing.T) {
		t.Parallel()
		f := newStoreFaultRig(t, 1)
		out, err := f.session().Start(ctx, nil)
		if out.Status != runtime.Failed || f.ctr.runs("hang") != 1 {
			t.Fatalf("start: %+v %v, server %s; want failed after one run of hang", out, err, f.ctr)
		}
		other := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {{"note.add", map[string]any{"body": "went on"}}}})}
		res, err := f.engine(0, other, nil, nil).Retry(ctx, out.Run, runtime.RetryOptions{By: "t", Force: true})
		if n := f.ctr.runs("hang"); n != 1 {
			t.Fatalf("hang ran %d times without a person's decision", n)
		}
		wantOutcome(t, "retry --force", res, err, runtime.Waiting)
		if len(res.Waiting) != 1 || res.Waiting[0].Kind != string(store.KindOutcomeUnknown) {
			t.Fatalf("the retried run waits for %+v, want one outcome-unknown decision", res.Waiting)
		}
		f.mustDecide(out.Run, res.Waiting[0].ID, true)
		res, err = f.engine(0, other, nil, nil).Resume(ctx, out.Run)
		wantOutcome(t, "resume after the approval", res, err, runtime.Completed)
		if n := f.ctr.runs("hang"); n != 2 {
			t.Fatalf("hang ran %d times, want 2 (once, and once more as approved)", n)
		}
		if probs, err := runtime.Reconcile(ctx, f.st, out.Run); err != nil || len(probs) > 0 {
			t.Fatalf("reconcile: %v %v", probs, err)
		}
	})

	// The disk stays full: not even the step's failure is recorded; the
	// run is left running. Once space is freed, resume asks a person.
	t.Run("full-until-freed", func(t *testing.T) {
		t.Parallel()
		f := newStoreFaultRig(t, -1)
		out, err := f.session().Start(ctx, nil)
		if err == nil || !errors.Is(err, errDiskFull) {
			t.Fatalf("start with the disk full: %+v %v", out, err)
		}
		f.free()
		if run, err := f.st.GetRun(ctx, out.Run); err != nil || run.Status != store.RunRunning {
			t.Fatalf("the run after the failure: %+v %v", run, err)
		}
		res, err := f.session().Resume(ctx, out.Run)
		wantOutcome(t, "resume once space was freed", res, err, runtime.Waiting)
		if len(res.Waiting) != 1 || res.Waiting[0].Kind != string(store.KindOutcomeUnknown) || f.ctr.runs("hang") != 1 {
			t.Fatalf("the run waits for %+v, server %s; want one outcome-unknown decision and one run", res.Waiting, f.ctr)
		}
		f.mustDecide(out.Run, res.Waiting[0].ID, true)
		res, err = f.session().Resume(ctx, out.Run)
		wantOutcome(t, "resume after the approval", res, err, runtime.Completed)
		if n := f.ctr.runs("hang"); n != 2 {
			t.Fatalf("hang ran %d times, want 2 (once, and once more as approved)", n)
		}
	})
}

// TestBuiltinWriteInterruptedIsNotUnknown: a built-in's start, effect
// and outcome are one transaction (registry.InStore), so whichever commit
// the disk fills at, the note.add call is recorded whole or not at all
// (never left started), and once the disk is freed `retry --force` (or
// resume) gets the run to completed with no outcome-unknown decision and
// exactly one note: the one the retried agent wrote. And the call costs
// one commit: a run of one note.add call commits once more than a run of
// none (counted at the store's commit).
func TestBuiltinWriteInterruptedIsNotUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	doc := buildDoc(t, "builtinfault", agentStep("act", "ops", []string{"note.add"}, ""))
	tr := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {{"note.add", map[string]any{"body": "once"}}}})}
	faulted := 0
	for at := int64(1); at <= 12; at++ {
		r := newRig(t, rigConfig{}, doc)
		var commits, fail atomic.Int64
		fail.Store(at)
		r.sqlite().SetCommitFault(func() error {
			if n := commits.Add(1); fail.Load() > 0 && n >= fail.Load() {
				return errDiskFull
			}
			return nil
		})
		out, _ := r.engine(0, tr, nil, nil).Start(ctx, nil)
		fail.Store(0)
		if out.Run == "" || out.Status == runtime.Completed {
			continue // the run was not created, or the fault came after its end
		}
		faulted++
		for _, row := range r.calls(out.Run) {
			if row.State != store.CallSucceeded {
				t.Errorf("disk full from commit %d: the note.add call was left %s, want recorded whole or not at all", at, row.State)
			}
		}
		res, err := r.engine(0, tr, nil, nil).Resume(ctx, out.Run)
		if err == nil && res.Status == runtime.Failed {
			res, err = r.engine(0, tr, nil, nil).Retry(ctx, out.Run, runtime.RetryOptions{By: "t", Force: true})
		}
		if err != nil || res.Status != runtime.Completed {
			t.Fatalf("disk full from commit %d: after freeing it, %+v %v; want completed with no person asked", at, res, err)
		}
		ns, _ := r.st.ListNotes(ctx, "", "", 10)
		if len(ns) != 1 || ns[0].Body != "once" {
			t.Errorf("disk full from commit %d: notes %+v, want exactly one", at, ns)
		}
	}
	if faulted == 0 {
		t.Fatal("no fault point interrupted the run: the test proves nothing")
	}

	commitsOf := func(calls []tcall) int64 {
		r := newRig(t, rigConfig{}, doc)
		var commits atomic.Int64
		r.sqlite().SetCommitFault(func() error { commits.Add(1); return nil })
		out, err := r.engine(0, map[string]string{"ops": transcriptOf(map[string][]tcall{"act": calls})}, nil, nil).Start(ctx, nil)
		if err != nil || out.Status != runtime.Completed {
			t.Fatalf("run of %d calls: %+v %v", len(calls), out, err)
		}
		return commits.Load()
	}
	none, one := commitsOf(nil), commitsOf([]tcall{{"note.add", map[string]any{"body": "once"}}})
	if one-none != 1 {
		t.Errorf("a run of one note.add call made %d commits, a run of none %d: the call cost %d, want 1", one, none, one-none)
	}
}
