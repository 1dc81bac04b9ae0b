package runtime_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// newRearmedFaultRig is newStoreFaultRig whose fault is armed again by
// every tools/call the server answers while arm is set: each run of the
// side effect is followed by one failed commit (its outcome's), as a
// disk that fills up again would.
func newRearmedFaultRig(t *testing.T, tr map[string]string) (*storeFaultRig, *atomic.Bool) {
	return newRearmedFaultRigN(t, tr, 1)
}

// newRearmedFaultRigN is newRearmedFaultRig with fails failed commits
// after each run (negative: until the test frees the store).
func newRearmedFaultRigN(t *testing.T, tr map[string]string, fails int64) (*storeFaultRig, *atomic.Bool) {
	t.Helper()
	ctr := startCtr(t, true)
	doc := buildDoc(t, "diskfull-again", agentStep("act", "ops", []string{"mcp.ctr.hang", "note.add"}, ""))
	f := &storeFaultRig{rig: newRig(t, rigConfig{http: map[string]string{"ctr": ctr.URL}}, doc), ctr: ctr, tr: tr}
	arm := &atomic.Bool{}
	arm.Store(true)
	ctr.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "tools/call" && arm.Load() {
				f.fails.Store(fails)
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
	return f, arm
}

// TestRetryOfRetriedLostCall: the side effect's outcome is lost, a
// person approves running it again, and the re-run's outcome is lost as
// well (the disk filled up again). Every later command (resume, retry,
// retry --force of the retried attempt) sends it again only on a new
// decision, once per approval; a denial ends it; and no legitimate step
// of this is taken for an altered store.
func TestRetryOfRetriedLostCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	same := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {{"mcp.ctr.hang", map[string]any{"target": "alpha"}}}})}
	none := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {{"note.add", map[string]any{"body": "went on"}}}})}
	for _, tc := range []struct {
		name    string
		tr      map[string]string // the transcript of the retried attempts
		approve bool              // the last decision
	}{
		{"asked-again-approved", same, true},
		{"asked-again-denied", same, false},
		{"not-asked-approved", none, true},
		{"not-asked-denied", none, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, arm := newRearmedFaultRig(t, same)
			eng := func() *runtime.Session { return f.engine(0, tc.tr, nil, nil) }
			out, err := f.session().Start(ctx, nil)
			if out.Status != runtime.Failed || f.ctr.runs("hang") != 1 {
				t.Fatalf("start: %+v %v, server %s", out, err, f.ctr)
			}
			run := out.Run
			res, err := eng().Retry(ctx, run, runtime.RetryOptions{By: "t", Force: true})
			wantOutcome(t, "retry --force", res, err, runtime.Waiting)
			if n := f.ctr.runs("hang"); n != 1 {
				t.Fatalf("hang ran %d times before a decision", n)
			}
			f.mustDecide(run, res.Waiting[0].ID, true)
			// The approved re-run runs; its outcome is lost again.
			res, err = eng().Resume(ctx, run)
			if n := f.ctr.runs("hang"); n != 2 {
				t.Fatalf("the approved re-run: hang ran %d times, want 2 (outcome %+v %v)", n, res, err)
			}
			arm.Store(false)
			st, _ := f.st.GetRun(ctx, run)
			t.Logf("after the lost re-run: %+v %v; run %s", res, err, st.Status)
			if st.Status == store.RunCompleted {
				t.Fatalf("the run completed although the re-run's outcome was never recorded: calls %+v", f.calls(run))
			}
			// Whatever comes next, nothing is sent without a new decision.
			for i := 0; i < 2; i++ {
				if st, _ := f.st.GetRun(ctx, run); st.Status == store.RunFailed {
					res, err = eng().Retry(ctx, run, runtime.RetryOptions{By: "t", Force: true})
				} else {
					res, err = eng().Resume(ctx, run)
				}
				if n := f.ctr.runs("hang"); n != 2 {
					t.Fatalf("round %d: hang ran %d times without a new decision (%+v %v)", i, n, res, err)
				}
			}
			wantOutcome(t, "after the lost re-run", res, err, runtime.Waiting)
			if len(res.Waiting) != 1 || res.Waiting[0].Kind != string(store.KindOutcomeUnknown) {
				t.Fatalf("waits for %+v, want one outcome-unknown decision", res.Waiting)
			}
			if probs, err := runtime.Reconcile(ctx, f.st, run); err != nil || len(probs) > 0 {
				t.Fatalf("reconcile before the decision: %v %v", probs, err)
			}
			f.mustDecide(run, res.Waiting[0].ID, tc.approve)
			res, err = eng().Resume(ctx, run)
			wantOutcome(t, "after the last decision", res, err, runtime.Completed)
			want := 2
			if tc.approve {
				want = 3
			}
			if n := f.ctr.runs("hang"); n != want {
				t.Fatalf("hang ran %d times, want %d", n, want)
			}
			for _, c := range f.calls(run) {
				if c.State == store.CallStarted || c.State == store.CallOutcomeUnknown {
					t.Fatalf("the run completed with call %+v unresolved", c)
				}
			}
			if probs, err := runtime.Reconcile(ctx, f.st, run); err != nil || len(probs) > 0 {
				t.Fatalf("reconcile of the completed run: %v %v", probs, err)
			}
			if res, err := eng().Resume(ctx, run); err != nil || res.Status != runtime.Completed || f.ctr.runs("hang") != want {
				t.Fatalf("resume of the completed run: %+v %v, hang %d", res, err, f.ctr.runs("hang"))
			}
		})
	}
}

// TestLostRerunSameAttempt: the disk fills up after the side effect ran
// and stays full (the run is left running); once freed, a person
// approves running it again, and the disk fills up again after that
// re-run. Once freed again, resume asks a person anew; nothing is sent
// without a decision, and the run never completes with the call
// unresolved.
func TestLostRerunSameAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	same := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {{"mcp.ctr.hang", map[string]any{"target": "alpha"}}}})}
	none := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {{"note.add", map[string]any{"body": "went on"}}}})}
	for _, tc := range []struct {
		name    string
		tr      map[string]string
		approve bool
	}{
		{"asked-again-approved", same, true},
		{"asked-again-denied", same, false},
		{"not-asked-approved", none, true},
		{"not-asked-denied", none, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, arm := newRearmedFaultRigN(t, same, -1)
			eng := func() *runtime.Session { return f.engine(0, tc.tr, nil, nil) }
			out, _ := f.session().Start(ctx, nil)
			run := out.Run
			f.free()
			res, err := eng().Resume(ctx, run)
			wantOutcome(t, "resume once freed", res, err, runtime.Waiting)
			f.mustDecide(run, res.Waiting[0].ID, true)
			res, err = eng().Resume(ctx, run)
			if n := f.ctr.runs("hang"); n != 2 {
				t.Fatalf("the approved re-run: hang ran %d times, want 2 (%+v %v)", n, res, err)
			}
			arm.Store(false)
			f.free()
			for i := 0; i < 2; i++ {
				if st, _ := f.st.GetRun(ctx, run); st.Status == store.RunFailed {
					res, err = eng().Retry(ctx, run, runtime.RetryOptions{By: "t", Force: true})
				} else {
					res, err = eng().Resume(ctx, run)
				}
				if n := f.ctr.runs("hang"); n != 2 {
					t.Fatalf("round %d: hang ran %d times without a new decision (%+v %v)", i, n, res, err)
				}
			}
			wantOutcome(t, "after the lost re-run", res, err, runtime.Waiting)
			if probs, err := runtime.Reconcile(ctx, f.st, run); err != nil || len(probs) > 0 {
				t.Fatalf("reconcile before the decision: %v %v", probs, err)
			}
			f.mustDecide(run, res.Waiting[0].ID, tc.approve)
			res, err = eng().Resume(ctx, run)
			wantOutcome(t, "after the last decision", res, err, runtime.Completed)
			want := 2
			if tc.approve {
				want = 3
			}
			if n := f.ctr.runs("hang"); n != want {
				t.Fatalf("hang ran %d times, want %d", n, want)
			}
			for _, c := range f.calls(run) {
				if c.State == store.CallStarted || c.State == store.CallOutcomeUnknown {
					t.Fatalf("the run completed with call %+v unresolved", c)
				}
			}
			if probs, err := runtime.Reconcile(ctx, f.st, run); err != nil || len(probs) > 0 {
				t.Fatalf("reconcile of the completed run: %v %v", probs, err)
			}
		})
	}
}

// TestLostCallWithSecretArgsNotAskedAgain: a side-effecting call's
// arguments hold a secret value (stored redacted) and its outcome is
// lost (the disk fills up after it was sent: stays full, so the run is
// left running, or fails one commit, so its step fails and is retried).
// The agent, resumed or retried, never asks the call again. A person's
// decision settles it: denied, or approved (the runtime cannot run it
// again: it has no arguments but redacted ones), the call is recorded
// failed and the run completes; it is never sent again, and never with
// the redacted arguments. Before the fix the run waited for a decision
// already taken ("nothing is left to decide: resume the run", forever),
// and a retried attempt's call was not settled even by a denial.
func TestLostCallWithSecretArgsNotAskedAgain(t *testing.T) {
	t.Parallel()
	const key = "sk_test_51Hlostcallsecret42"
	for _, tc := range []struct {
		name    string
		retry   bool
		approve bool
	}{
		{"resumed-approved", false, true},
		{"resumed-denied", false, false},
		{"retried-approved", true, true},
		{"retried-denied", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url, _ := stripeMock(t)
			ctr := startCtr(t, true)
			doc := buildDoc(t, "lost-secret-args", agentStep("act", "ops", []string{"mcp.ctr.hang", "note.add"}, ""))
			f := &storeFaultRig{rig: newRig(t, rigConfig{stripe: url, http: map[string]string{"ctr": ctr.URL}, secrets: map[string]string{"STRIPE_API_KEY": key}}, doc), ctr: ctr}
			fails := int64(-1)
			if tc.retry {
				fails = 1
			}
			var armed atomic.Bool
			ctr.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
				return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
					res, err := next(ctx, method, req)
					if method == "tools/call" && !armed.Swap(true) {
						f.fails.Store(fails)
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
			with := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {{"mcp.ctr.hang", map[string]any{"target": "k=" + key}}}})}
			none := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {{"note.add", map[string]any{"customerId": "cus_ada", "body": "went on"}}}})}
			eng := func() *runtime.Session { return f.engine(0, none, nil, nil) }
			out, _ := f.engine(0, with, nil, nil).Start(ctx, nil)
			run := out.Run
			f.free()
			var res runtime.Outcome
			var err error
			if tc.retry {
				res, err = eng().Retry(ctx, run, runtime.RetryOptions{By: "t", Force: true})
			} else {
				res, err = eng().Resume(ctx, run)
			}
			wantOutcome(t, "resume or retry", res, err, runtime.Waiting)
			if len(res.Waiting) != 1 || res.Waiting[0].Kind != string(store.KindOutcomeUnknown) {
				t.Fatalf("waits for %+v, want one outcome-unknown decision", res.Waiting)
			}
			f.mustDecide(run, res.Waiting[0].ID, tc.approve)
			res, err = eng().Resume(ctx, run)
			if res.Status == runtime.Waiting {
				t.Fatalf("after the decision the run still waits for %+v (%v): calls %+v", res.Waiting, err, f.calls(run))
			}
			wantOutcome(t, "resume after the decision", res, err, runtime.Completed)
			if n := ctr.runs("hang"); n != 1 {
				t.Fatalf("hang ran %d times, want 1 (its arguments as sent are not stored)", n)
			}
			for _, a := range ctr.argsOf("hang") {
				if !strings.Contains(a, key) {
					t.Fatalf("hang was sent %s, not the arguments the agent asked with", a)
				}
			}
			for _, c := range f.calls(run) {
				if c.State == store.CallStarted || c.State == store.CallOutcomeUnknown {
					t.Fatalf("the run completed with call %+v unresolved", c)
				}
				if c.Tool == "mcp.ctr.hang" && c.State != store.CallFailed {
					t.Fatalf("the hang call is %s, want failed", c.State)
				}
			}
			if probs, err := runtime.Reconcile(ctx, f.st, run); err != nil || len(probs) > 0 {
				t.Fatalf("reconcile: %v %v", probs, err)
			}
			if res, err := eng().Resume(ctx, run); err != nil || res.Status != runtime.Completed || ctr.runs("hang") != 1 {
				t.Fatalf("resume of the completed run: %+v %v", res, err)
			}
		})
	}
}

// TestApprovedRerunLostAgain: a side-effecting call's answer is lost (the
// server ran it and stalled past the call timeout), a person approves
// running it again, and the re-run's answer is lost the same way. The
// re-run is outcome-unknown again and waits for a new decision (it must
// not fail the run with a state error); asked again or not, it is sent
// once per approval.
func TestApprovedRerunLostAgain(t *testing.T) {
	t.Parallel()
	for _, asked := range []bool{true, false} {
		name := map[bool]string{true: "asked-again", false: "not-asked"}[asked]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctr := startCtr(t, true)
			ctr.hangs = 2
			doc := buildDoc(t, "lost-twice", agentStep("act", "ops", []string{"mcp.ctr.hang", "note.add"}, ""))
			r := newRig(t, rigConfig{http: map[string]string{"ctr": ctr.URL}}, doc)
			ctx := context.Background()
			first := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {
				{"mcp.ctr.hang", map[string]any{"target": "alpha"}},
				{"note.add", map[string]any{"body": "after the launch"}},
			}})}
			tr := first
			if !asked {
				tr = map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {{"note.add", map[string]any{"body": "went on"}}}})}
			}
			short := func(o *runtime.SessionOptions) { o.CallTimeout = 300 * time.Millisecond }
			out, err := r.engine(0, first, nil, short).Start(ctx, nil)
			wantOutcome(t, "start", out, err, runtime.Waiting)
			r.mustDecide(out.Run, out.Waiting[0].ID, true)
			res, err := r.engine(0, tr, nil, short).Resume(ctx, out.Run)
			if n := ctr.runs("hang"); n != 2 {
				t.Fatalf("hang ran %d times, want 2 (once lost, once approved and lost)", n)
			}
			wantOutcome(t, "resume after approving the re-run (lost again)", res, err, runtime.Waiting)
			if len(res.Waiting) != 1 || res.Waiting[0].Kind != string(store.KindOutcomeUnknown) {
				t.Fatalf("waits for %+v, want one new outcome-unknown decision", res.Waiting)
			}
			res, err = r.engine(0, tr, nil, short).Resume(ctx, out.Run)
			wantOutcome(t, "resume without a new decision", res, err, runtime.Waiting)
			if n := ctr.runs("hang"); n != 2 {
				t.Fatalf("hang ran %d times without a new decision", n)
			}
			r.mustDecide(out.Run, res.Waiting[0].ID, true)
			res, err = r.engine(0, tr, nil, short).Resume(ctx, out.Run)
			wantOutcome(t, "resume after the second approval", res, err, runtime.Completed)
			if n := ctr.runs("hang"); n != 3 {
				t.Fatalf("hang ran %d times, want 3", n)
			}
			if probs, err := runtime.Reconcile(ctx, r.st, out.Run); err != nil || len(probs) > 0 {
				t.Fatalf("reconcile: %v %v", probs, err)
			}
		})
	}
}

// TestCancelledLostCallsReconcile: runs cancelled while an outcome-unknown
// call waits for a person (undecided, approved, denied; its arguments
// with a secret value or not) are not taken for altered stores, and
// nothing runs after the cancel.
func TestCancelledLostCallsReconcile(t *testing.T) {
	t.Parallel()
	const key = "sk_test_51Hcancelledsecret42"
	for _, tc := range []struct {
		name   string
		target string
		decide string // "", "approve", "deny"
	}{
		{"undecided", "alpha", ""},
		{"approved", "alpha", "approve"},
		{"denied", "alpha", "deny"},
		{"secret-undecided", "k=" + key, ""},
		{"secret-approved", "k=" + key, "approve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url, _ := stripeMock(t)
			ctr := startCtr(t, true)
			ctr.hangs = 1
			doc := buildDoc(t, "cancel-lost", agentStep("act", "ops", []string{"mcp.ctr.hang", "note.add"}, ""))
			r := newRig(t, rigConfig{stripe: url, http: map[string]string{"ctr": ctr.URL}, secrets: map[string]string{"STRIPE_API_KEY": key}}, doc)
			tr := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {{"mcp.ctr.hang", map[string]any{"target": tc.target}}}})}
			short := func(o *runtime.SessionOptions) { o.CallTimeout = 300 * time.Millisecond }
			out, err := r.engine(0, tr, nil, short).Start(ctx, nil)
			wantOutcome(t, "start", out, err, runtime.Waiting)
			if tc.decide != "" {
				r.mustDecide(out.Run, out.Waiting[0].ID, tc.decide == "approve")
			}
			if err := runtime.Cancel(ctx, r.st, out.Run, "t", "enough with "+key); err != nil {
				t.Fatal(err)
			}
			if probs, err := runtime.Reconcile(ctx, r.st, out.Run); err != nil || len(probs) > 0 {
				t.Fatalf("reconcile of the cancelled run: %v %v", probs, err)
			}
			res, err := r.engine(0, tr, nil, short).Resume(ctx, out.Run)
			if err != nil || ctr.runs("hang") != 1 {
				t.Fatalf("resume of the cancelled run: %+v %v, hang ran %d", res, err, ctr.runs("hang"))
			}
		})
	}
}
