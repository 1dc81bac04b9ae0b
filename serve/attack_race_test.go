package serve_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/serve"
)

// fireNotes sends n note.add calls at once from the agent's session and
// returns how many the agent was told succeeded.
func fireNotes(a *agent, n int, also func()) int {
	var ok atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := a.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "note__add", Arguments: map[string]any{"customerId": "cus_ada", "body": fmt.Sprintf("race %d", i)}})
			if err == nil && !res.IsError {
				ok.Add(1)
			}
		}()
	}
	if also != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			also()
		}()
	}
	close(start)
	wg.Wait()
	return int(ok.Load())
}

// kindsAfter returns the records of kind after the first record of
// kind mark (seq order).
func recordsOf(recs []audit.Record, kind string) []audit.Record {
	var out []audit.Record
	for _, r := range recs {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// checkCalls checks that every note in the store is a call the audit log
// records as succeeded in step lookup, and that the log verifies.
func checkCalls(t *testing.T, r *rig, run string, told int) (notes int, recs []audit.Record) {
	t.Helper()
	au, err := r.srv.Audit(context.Background(), run, true)
	if err != nil {
		t.Fatal(err)
	}
	if !*au.Verified {
		t.Errorf("BROKEN: the audit log does not verify: %+v", au.Problems)
	}
	notes = countNotes(t, r.st, "cus_ada")
	succeeded := 0
	for _, rec := range recordsOf(au.Records, "call.succeeded") {
		if rec.Tool == "note.add" {
			succeeded++
		}
	}
	if notes != succeeded {
		t.Errorf("BROKEN: %d notes in the store, %d call.succeeded records for note.add", notes, succeeded)
	}
	t.Logf("%d notes in the store, %d call.succeeded, the agent told of %d", notes, succeeded, told)
	if told > notes {
		t.Errorf("BROKEN: the agent was told %d calls succeeded; %d notes exist", told, notes)
	}
	return notes, au.Records
}

// TestAttackFinishRacesCalls: the agent finishes its step while many of
// its calls are in flight. Every call either ran before the step ended
// (and is recorded so) or was refused; nothing runs in the next step's
// time or unrecorded.
func TestAttackFinishRacesCalls(t *testing.T) {
	r := newRig(t, "")
	run, _, a := startAgentRun(t, r)
	told := fireNotes(a, 40, func() {
		for countNotes(t, r.st, "cus_ada") < 3 {
			time.Sleep(time.Millisecond)
		}
		_, _ = a.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: serve.FinishTool, Arguments: map[string]any{"output": "raced"}})
	})
	r.waitStatus(run, "waiting", "gate")
	// Calls after the step ended: refused, not run.
	before := countNotes(t, r.st, "cus_ada")
	fireNotes(a, 8, nil)
	if n := countNotes(t, r.st, "cus_ada"); n != before {
		t.Errorf("BROKEN: %d notes were added after the step ended", n-before)
	}
	_, recs := checkCalls(t, r, run, told)
	finished := -1
	for i, rec := range recs {
		if rec.Kind == "step.finished" && rec.Step == "lookup" {
			finished = i
		}
	}
	if finished < 0 {
		t.Fatal("no step.finished record")
	}
	for _, rec := range recs[finished:] {
		if rec.Kind == "call.started" || rec.Kind == "call.succeeded" {
			t.Errorf("BROKEN: %s record (seq %d) after the step finished", rec.Kind, rec.Seq)
		}
	}
}

// TestAttackCancelRacesCalls: the operator cancels the run while the
// agent's calls are in flight: no call starts after the cancellation is
// recorded; what ran is recorded; the log verifies.
func TestAttackCancelRacesCalls(t *testing.T) {
	r := newRig(t, "")
	run, _, a := startAgentRun(t, r)
	told := fireNotes(a, 40, func() {
		for countNotes(t, r.st, "cus_ada") < 3 {
			time.Sleep(time.Millisecond)
		}
		if err := r.srv.CancelRun(context.Background(), run, "tester", "race"); err != nil {
			t.Errorf("cancel: %v", err)
		}
	})
	// A cancelled run ends failed (runtime.Cancel).
	if rs, _ := r.srv.Run(context.Background(), run); rs.Status != "failed" || !strings.HasPrefix(rs.Reason, "cancelled by tester") {
		au, _ := r.srv.Audit(context.Background(), run, false)
		for _, rec := range au.Records[max(0, len(au.Records)-8):] {
			t.Logf("%d %s %s %s %s", rec.Seq, rec.Kind, rec.Step, rec.Tool, rec.Data)
		}
		t.Fatalf("run status %s (%s) after CancelRun returned nil", rs.Status, rs.Reason)
	}
	before := countNotes(t, r.st, "cus_ada")
	fireNotes(a, 4, nil)
	if n := countNotes(t, r.st, "cus_ada"); n != before {
		t.Errorf("BROKEN: %d notes were added after the run was cancelled", n-before)
	}
	_, recs := checkCalls(t, r, run, told)
	cancelled := -1
	for i, rec := range recs {
		if rec.Kind == "run.cancelled" {
			cancelled = i
		}
	}
	if cancelled < 0 {
		t.Fatal("no run.cancelled record")
	}
	for _, rec := range recs[cancelled:] {
		if rec.Kind == "call.started" {
			t.Errorf("BROKEN: call.started (seq %d) after run.cancelled", rec.Seq)
		}
	}
}

// TestAttackCallLimitFlood: many calls at once cannot get past the
// step's call limit (runtime.DefaultMaxToolCalls).
func TestAttackCallLimitFlood(t *testing.T) {
	r := newRig(t, "")
	run, _, a := startAgentRun(t, r)
	told := fireNotes(a, runtime.DefaultMaxToolCalls+30, nil)
	r.waitStatus(run, "failed", "") // the step ended at its limit
	notes, recs := checkCalls(t, r, run, told)
	if notes > runtime.DefaultMaxToolCalls {
		t.Errorf("BROKEN: %d notes, over the step's limit of %d calls", notes, runtime.DefaultMaxToolCalls)
	}
	if len(recordsOf(recs, "step.call-limit")) == 0 {
		t.Error("no step.call-limit record")
	}
}

// TestAttackFinishWhileApprovalWaits: the agent asks for a call that
// needs approval and, while it waits, finishes the step. The run goes
// on and completes; the approval left behind must run nothing if a
// person approves it later, and the audit log must verify.
func TestAttackFinishWhileApprovalWaits(t *testing.T) {
	r, rec := approvalRig(t)
	ctx := context.Background()
	run, _, err := r.srv.CreateRun(ctx, "approval.json", readTestdata(t, "approval.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	a := r.connect(tok.MCPURL, tok.Token)
	a.tools(t, "charge__refund", "charge__get", "customer__get", serve.FinishTool)
	args := map[string]any{"chargeId": "ch_duplicate", "reason": "duplicate"}
	var wg sync.WaitGroup
	wg.Add(1)
	var answer string
	go func() {
		defer wg.Done()
		answer, _ = a.call(t, "charge__refund", args)
	}()
	id := waitApproval(t, r, run)
	if text, isErr := a.call(t, serve.FinishTool, map[string]any{"output": "left it waiting"}); isErr {
		t.Fatalf("finish: %s", text)
	}
	wg.Wait()
	if !strings.Contains(answer, "ended") {
		t.Logf("the waiting call was answered %q", answer)
	}
	r.waitStatus(run, "completed", "")
	if pend, _ := r.srv.Pending(ctx, run); len(pend) > 0 {
		t.Logf("a completed run still lists %d pending item(s): %+v", len(pend), pend[0].Pending)
	}
	_, derr := r.srv.Decide(ctx, run, id, runtime.Verdict{Approve: true, By: "tester"})
	t.Logf("approving the left-behind approval: %v", derr)
	if n := refunds(rec); n != 0 {
		t.Errorf("BROKEN: %d refunds ran on an approval of a step that had ended", n)
	}
	au, err := r.srv.Audit(ctx, run, true)
	if err != nil {
		t.Fatal(err)
	}
	if !*au.Verified {
		t.Errorf("BROKEN: the audit log does not verify after a step finished with a call waiting for approval: %+v", au.Problems)
	}
}

// TestAttackVerifyWhileRunning: the operator verifies a run's audit log
// (GET .../audit?verify=true, the console's "Verify the chain") while its
// agent works. The runtime commits each change with its records, so the
// store agrees with the log at every commit; verification must not
// report a disagreement that no committed state had (a false tamper
// alarm teaches operators to ignore it).
func TestAttackVerifyWhileRunning(t *testing.T) {
	r := newRig(t, "")
	run, _, a := startAgentRun(t, r)
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad []string
	var mu sync.Mutex
	verifies := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			au, err := r.srv.Audit(ctx, run, true)
			if err != nil {
				continue
			}
			mu.Lock()
			verifies++
			if !*au.Verified {
				for _, p := range au.Problems {
					bad = append(bad, p.Message)
				}
			}
			mu.Unlock()
		}
	}()
	fireNotes(a, runtime.DefaultMaxToolCalls+10, nil) // ends the step at its call limit: the run fails
	r.waitStatus(run, "failed", "")
	close(stop)
	wg.Wait()
	if len(bad) > 0 {
		t.Errorf("BROKEN: %d of %d verifications of a run executing here reported problems its store never had (it reads the log and the rows in separate reads), e.g. %q", len(bad), verifies, bad[0])
	}
	au, err := r.srv.Audit(ctx, run, true)
	if err != nil || !*au.Verified {
		t.Fatalf("the final audit: %v %+v", err, au.Problems)
	}
}
